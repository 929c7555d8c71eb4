"""The wheel (tools/package --wheel): R2SP as a pip-installable package for one Python version,
dist/r2sp-VERSION-cpXY-cpXY-linux_x86_64.whl, made from an unpacked release bundle
(bundle.py) holding the Python package. Installed, it is

  r2sp/            the package (worker/python/r2sp/) with its extensions (_core, _models),
                   their RPATH set to _launch/lib, and r2sp/_version.py
  r2sp/_launch/    the bundle but its python/: bin/ (scheduler, server: the workers are the
                   user's Python scripts, so no worker binary and its oneDNN), libexec/, lib/
                   (glibc carried for older hosts), share/r2sp/deploy/, MANIFEST.json (the
                   checksums of these files); and
                   tools/pylib/, the launcher's library, which r2sp-run runs jobs with
  r2sp-VERSION.dist-info/   METADATA, WHEEL, entry_points.txt (console script r2sp-run),
                   RECORD

Written with the standard library (zipfile): files keep their modes, so pip installs the
programs executable."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import zipfile

from .bundle import BundleError

PACKAGE = "r2sp"
LAUNCH_DIR = "_launch"
CONSOLE_SCRIPTS = {"r2sp-run": "r2sp.run:main"}


def python_tag(python):
    """'cpXY' of the interpreter `python` (the one the extension is built for)."""
    r = subprocess.run([python, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise BundleError(f"{python}: cannot ask its version: {r.stderr.strip()}")
    return r.stdout.strip()


def wheel_name(version, tag):
    return f"{PACKAGE}-{version}-{tag}-{tag}-linux_x86_64.whl"


def layout(bundle_dir, pylib_dir, tree, version):
    """Lays out the wheel's files in `tree` (made anew) from the unpacked bundle (with its
    python/r2sp) and the launcher's library."""
    package = os.path.join(bundle_dir, "python", PACKAGE)
    if not os.path.isfile(os.path.join(package, "_core.so")):
        raise BundleError(f"{bundle_dir} holds no Python package (build //worker/python:_core.so)")
    if os.path.exists(tree):
        shutil.rmtree(tree)
    target = os.path.join(tree, PACKAGE)
    shutil.copytree(package, target, symlinks=False)
    launch = os.path.join(target, LAUNCH_DIR)
    os.makedirs(launch)
    for name in sorted(os.listdir(bundle_dir)):
        if name in ("python", "worker_files"):
            continue
        source = os.path.join(bundle_dir, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(launch, name))
        else:
            shutil.copy(source, os.path.join(launch, name))
    _drop_python_from_manifest(os.path.join(launch, "MANIFEST.json"))
    shutil.copytree(pylib_dir, os.path.join(launch, "tools", "pylib"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for extension in ("_core.so", "_models.so"):
        path = os.path.join(target, extension)
        if os.path.isfile(path):
            subprocess.run(["patchelf", "--set-rpath", f"$ORIGIN/{LAUNCH_DIR}/lib", path],
                           check=True)
    with open(os.path.join(target, "_version.py"), "w") as f:
        f.write(f'"""The version of this build of r2sp."""\n\nVERSION = "{version}"\n')


def _drop_python_from_manifest(path):
    """The bundle's MANIFEST.json without python/'s files, which the wheel holds as r2sp/."""
    with open(path) as f:
        manifest = json.load(f)
    manifest["files"] = {name: digest for name, digest in manifest["files"].items()
                         if not name.startswith("python/")}
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


def metadata_files(version, tag, python_version):
    """{dist-info file name: text} but RECORD."""
    metadata = "\n".join([
        "Metadata-Version: 2.1", f"Name: {PACKAGE}", f"Version: {version}",
        "Summary: R2SP: a parameter-server system for data-parallel training, with "
        "r2sp.torch for PyTorch scripts and r2sp-run to launch them",
        "License: see LICENSE in the source", f"Requires-Python: =={python_version}.*", ""])
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: r2sp tools/package",
                       "Root-Is-Purelib: false", f"Tag: {tag}-{tag}-linux_x86_64", ""])
    scripts = "".join(f"{name} = {target}\n" for name, target in CONSOLE_SCRIPTS.items())
    return {"METADATA": metadata, "WHEEL": wheel,
            "entry_points.txt": "[console_scripts]\n" + scripts}


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _add(archive, arcname, data, mode):
    info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16  # a regular file with its permissions
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)
    return f"{arcname},{_record_hash(data)},{len(data)}"


def write(tree, out_path, version, tag):
    """Zips `tree` (layout()'s) and the dist-info into the wheel `out_path`."""
    dist_info = f"{PACKAGE}-{version}.dist-info"
    python_version = f"{tag[2]}.{tag[3:]}"
    records = []
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with zipfile.ZipFile(out_path, "w") as archive:
        for root, dirs, names in os.walk(tree):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    data = f.read()
                mode = 0o755 if os.stat(path).st_mode & 0o111 else 0o644
                records.append(_add(archive, os.path.relpath(path, tree), data, mode))
        for name, text in metadata_files(version, tag, python_version).items():
            records.append(_add(archive, f"{dist_info}/{name}", text.encode(), 0o644))
        records.append(f"{dist_info}/RECORD,,")
        _add(archive, f"{dist_info}/RECORD", ("\n".join(records) + "\n").encode(), 0o644)

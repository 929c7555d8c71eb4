"""The release bundle every launcher backend ships: a relocatable directory (or tarball)
r2sp-VERSION-VARIANT/ holding

  bin/       scheduler, server, worker (and any extra programs), their RPATH set to ../lib
  lib/       every shared library they load except the C runtime and, for the cuda variant,
             NVIDIA's own libraries (the target's driver and CUDA toolkit provide those)
  share/r2sp/deploy/   the scripts a remote host runs (role runner, Python worker starter, pod
             entrypoint, user-data, the [data] set's stager)
  python/r2sp/   optional: the r2sp package (worker/python/r2sp/) with its extension inside as
             r2sp/_core.so, its RPATH set to ../../lib; Python workers get PYTHONPATH=python/
  worker_files/  optional: the user's files (tools/package --worker_files), where Python
             workers run (run_role --worker_cmd)
  env.sh     optional: puts bin/ on PATH and finds CUDA's libraries (toolkit or pip wheels)
  MANIFEST.json   version, variant, commit, the newest glibc symbol version the files need,
             and the sha256 of every file

Made by tools/package (which builds the binaries first) and tools/bundle_gpu. Unpacked anywhere,
bin/worker runs without LD_LIBRARY_PATH. Needs patchelf (Debian package patchelf)."""

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile

ROLES = ("scheduler", "server", "worker")
# The C runtime stays the target's own: bundling it would not load. NVIDIA's libraries come
# from the target's driver and CUDA installation, which must match its GPU.
SYSTEM_LIB = re.compile(
    r"^(libc|libm|libdl|librt|libpthread|libresolv|ld-linux[^.]*|libgcc_s|libcuda|libcudart|"
    r"libcudnn[a-z_]*|libcublas(Lt)?|libnvidia[a-z-]*|libnvrtc|libnvJitLink|libcufft|libcurand)"
    r"([.-]|$)")
GLIBC_VERSION = re.compile(rb"GLIBC_(\d+)\.(\d+)")


class BundleError(Exception):
    """The bundle could not be made (a binary or tool missing, ldd failing); says why."""


def _run(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise BundleError(f"{' '.join(argv)}: {(r.stderr or r.stdout).strip()}")
    return r.stdout


def shared_libraries(path):
    """{name: resolved path} of the libraries `path` loads that the bundle carries; BundleError
    if the loader cannot find one of them here."""
    libs = {}
    for line in _run(["ldd", path]).splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if not arrow:
            continue
        name = name.strip()
        if SYSTEM_LIB.match(name):  # the target's own, found there (CUDA's may be absent here)
            continue
        if rest.startswith("not found"):
            raise BundleError(f"{path} needs {name}, which is not installed here")
        target = rest.split(" (")[0].strip()
        if target:
            libs[name] = target
    return libs


def newest_glibc(paths):
    """The newest GLIBC_x.y symbol version any of `paths` asks for, as 'x.y' ('' if none): the
    oldest C library the bundle runs on."""
    newest = (0, 0)
    for path in paths:
        with open(path, "rb") as f:
            for major, minor in GLIBC_VERSION.findall(f.read()):
                newest = max(newest, (int(major), int(minor)))
    return f"{newest[0]}.{newest[1]}" if newest != (0, 0) else ""


def sha256(path):
    """The file's sha256, hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _set_rpath(path, rpath):
    # DT_RPATH (not RUNPATH): it also serves the libraries' own dependencies, and it comes before
    # an LD_LIBRARY_PATH that may point at other versions of the same libraries.
    _run(["patchelf", "--force-rpath", "--set-rpath", rpath, path])


def check_worker_files(paths):
    """BundleError unless every path exists and no two share a name (each becomes
    worker_files/NAME)."""
    names = {}
    for path in paths:
        if not os.path.exists(path):
            raise BundleError(f"--worker_files: {path} not found")
        name = os.path.basename(os.path.normpath(path))
        if name in names:
            raise BundleError(f"--worker_files: {names[name]} and {path} would both be "
                              f"worker_files/{name}")
        names[name] = path


def _copy_python_package(out_dir, package_dir, core):
    """python/r2sp/ from `package_dir` (no caches, no extension built elsewhere) and `core` as
    python/r2sp/_core.so; the libraries the extension loads (when it is an ELF file)."""
    target = os.path.join(out_dir, "python", "r2sp")
    shutil.copytree(package_dir, target,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_core*.so"))
    shutil.copyfile(core, os.path.join(target, "_core.so"))
    os.chmod(os.path.join(target, "_core.so"), 0o755)
    if not _is_elf(os.path.join(target, "_core.so")):
        return {}
    _set_rpath(os.path.join(target, "_core.so"), "$ORIGIN/../../lib")
    return shared_libraries(core)


def _copy_worker_files(out_dir, paths):
    target = os.path.join(out_dir, "worker_files")
    os.makedirs(target)
    for path in paths:
        name = os.path.join(target, os.path.basename(os.path.normpath(path)))
        if os.path.isdir(path):
            shutil.copytree(path, name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, name)  # its mode too: a script stays executable


def make(out_dir, binaries, version, variant, commit, deploy_dir=None, env_sh=None,
         python_package=None, worker_files=()):
    """Builds the bundle directory `out_dir` (replaced if it exists) from `binaries`
    ({name in bin/: source path}; ELF files get their RPATH set and their libraries copied,
    others are copied as they are). python_package: (the r2sp package's directory, its
    _core.so) for python/r2sp/; worker_files: paths (files or directories) for worker_files/.
    Returns the manifest."""
    if shutil.which("patchelf") is None:
        raise BundleError("patchelf not found (Debian package patchelf; tools/install_deps installs it)")
    sources = list(binaries.values()) + ([python_package[1]] if python_package else [])
    for source in sources:  # all found before the old bundle goes
        if not os.path.isfile(source):
            raise BundleError(f"{source} not found; build it first")
    if python_package and not os.path.isdir(python_package[0]):
        raise BundleError(f"{python_package[0]}: no such package directory")
    check_worker_files(worker_files)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    bin_dir, lib_dir = os.path.join(out_dir, "bin"), os.path.join(out_dir, "lib")
    os.makedirs(bin_dir)
    os.makedirs(lib_dir)
    libs = {}
    for name, source in sorted(binaries.items()):
        target = os.path.join(bin_dir, name)
        shutil.copyfile(source, target)
        os.chmod(target, 0o755)
        if _is_elf(target):
            libs.update(shared_libraries(source))
            _set_rpath(target, "$ORIGIN/../lib")
    for name, source in sorted(libs.items()):
        target = os.path.join(lib_dir, name)
        shutil.copyfile(source, target)  # follows the symlink: the real file under the soname
        os.chmod(target, 0o755)
        _set_rpath(target, "$ORIGIN")
    if python_package:
        for name, source in sorted(_copy_python_package(out_dir, *python_package).items()):
            if not os.path.exists(os.path.join(lib_dir, name)):
                shutil.copyfile(source, os.path.join(lib_dir, name))
                os.chmod(os.path.join(lib_dir, name), 0o755)
                _set_rpath(os.path.join(lib_dir, name), "$ORIGIN")
    if worker_files:
        _copy_worker_files(out_dir, worker_files)
    if deploy_dir:
        shutil.copytree(deploy_dir, os.path.join(out_dir, "share", "r2sp", "deploy"))
    if env_sh:
        shutil.copyfile(env_sh, os.path.join(out_dir, "env.sh"))
    manifest = {
        "version": version,
        "variant": variant,
        "commit": commit,
        "glibc_min": newest_glibc(
            [os.path.join(d, n) for d in (bin_dir, lib_dir) for n in os.listdir(d)
             if _is_elf(os.path.join(d, n))]),
        "files": {os.path.relpath(os.path.join(root, n), out_dir): sha256(os.path.join(root, n))
                  for root, _, names in os.walk(out_dir) for n in sorted(names)},
    }
    with open(os.path.join(out_dir, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    return manifest


def _is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def tarball_manifest(tarball):
    """(bundle directory name, MANIFEST.json text) of a tarball tools/package made; BundleError
    if it is not one."""
    try:
        with tarfile.open(tarball) as t:
            for member in t.getmembers():
                parts = member.name.split("/")
                if len(parts) == 2 and parts[1] == "MANIFEST.json":
                    return parts[0], t.extractfile(member).read().decode()
    except (OSError, tarfile.TarError) as e:
        raise BundleError(f"{tarball}: not a release bundle ({e}); make one with tools/package")
    raise BundleError(f"{tarball} has no MANIFEST.json; make bundles with tools/package")


def check_files(manifest, digests):
    """Problems with a bundle whose files have the sha256 `digests` ({path: hex}, wherever they
    were computed: here by verify, on a remote host by the ssh backend): files of `manifest`
    (parsed MANIFEST.json) missing or differing. [] when it is intact."""
    problems = []
    for rel, digest in manifest["files"].items():
        if rel not in digests:
            problems.append(f"{rel}: missing")
        elif digests[rel] != digest:
            problems.append(f"{rel}: checksum differs")
    return problems


def verify(bundle_dir):
    """Problems with an unpacked bundle: files whose sha256 differs from MANIFEST.json, or that
    are missing. [] when it is intact."""
    with open(os.path.join(bundle_dir, "MANIFEST.json")) as f:
        manifest = json.load(f)
    digests = {rel: sha256(os.path.join(bundle_dir, rel)) for rel in manifest["files"]
               if os.path.isfile(os.path.join(bundle_dir, rel))}
    return check_files(manifest, digests)


def same_manifest(installed_text, manifest_text):
    """Whether an installed bundle's MANIFEST.json text describes the bundle `manifest_text` (the
    tarball's): the same JSON, whatever its layout; False for text that is not JSON."""
    try:
        return json.loads(installed_text) == json.loads(manifest_text)
    except ValueError:
        return False


def installed(bundle_dir, manifest_text):
    """Whether `bundle_dir` holds the bundle whose MANIFEST.json is `manifest_text`, intact
    (verify): what a backend checks before deciding not to unpack it again."""
    try:
        with open(os.path.join(bundle_dir, "MANIFEST.json")) as f:
            text = f.read()
    except OSError:
        return False
    return same_manifest(text, manifest_text) and not verify(bundle_dir)


def tar(bundle_dir, tarball):
    """Packs `bundle_dir` into the gzip tarball `tarball`, under its own directory name, with
    owners and times that do not depend on who built it."""
    def clean(info):
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = 0
        return info

    tmp = tarball + ".tmp"
    # The gzip header too: no file name, no time, so the same bundle gives the same bytes.
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as t:
        t.add(bundle_dir, arcname=os.path.basename(bundle_dir.rstrip("/")), filter=clean)
    os.replace(tmp, tarball)

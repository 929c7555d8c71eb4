"""The release bundle every launcher backend ships: a relocatable directory (or tarball)
r2sp-VERSION-VARIANT/ holding

  bin/       scheduler, server, worker (and any extra programs): POSIX sh wrappers that run
             libexec/NAME, natively or through lib/glibc/ on a host whose C library is older
             than the programs need (carried_glibc.py); scripts as they are
  libexec/   the ELF programs, their RPATH set to ../lib
  lib/       every shared library they load except the C runtime and, for the cuda variant,
             NVIDIA's own libraries (the target's driver and CUDA toolkit provide those)
  lib/glibc/ the build machine's C library (glibc and libgcc_s), for older hosts only: on no
             RPATH, loaded only when a wrapper runs a program through its loader
  share/r2sp/deploy/   the scripts a remote host runs (role runner, Python worker starter, pod
             entrypoint, user-data, the [data] set's stager)
  python/r2sp/   optional: the r2sp package (worker/python/r2sp/) with its extension inside as
             r2sp/_core.so, its RPATH set to ../../lib; Python workers get PYTHONPATH=python/
  worker_files/  optional: the user's files (tools/package --worker_files), where Python
             workers run (run_role --worker_cmd)
  env.sh     optional: puts bin/ on PATH and finds CUDA's libraries (toolkit or pip wheels)
  MANIFEST.json   version, variant, commit, the glibc the bundle promises to run on
             (glibc_min), the one its files need natively (glibc_native), the carried one's
             version (glibc_carried), and the sha256 of every file

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

from . import carried_glibc, glibc_needs

ROLES = ("scheduler", "server", "worker")
# The C runtime is not in lib/: the host's serves the programs natively (a glibc on their RPATH
# would meet the host's loader, and fail); older hosts get the one in lib/glibc/. NVIDIA's
# libraries come from the target's driver and CUDA installation, which must match its GPU.
SYSTEM_LIB = re.compile(
    r"^(libc|libm|libdl|librt|libpthread|libresolv|ld-linux[^.]*|libgcc_s|libcuda|libcudart|"
    r"libcudnn[a-z_]*|libcublas(Lt)?|libnvidia[a-z-]*|libnvrtc|libnvJitLink|libcufft|libcurand)"
    r"([.-]|$)")


class BundleError(Exception):
    """The bundle could not be made (a binary or tool missing, ldd failing); says why."""


def _run(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise BundleError(f"{' '.join(argv)}: {(r.stderr or r.stdout).strip()}")
    return r.stdout


def _ldd(path):
    """{soname: resolved path} of every library `path` loads here, the C runtime's too."""
    libs = {}
    for line in _run(["ldd", path]).splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        target = rest.split(" (")[0].strip()
        if arrow and target and not rest.startswith("not found"):
            libs[name.strip()] = target
    return libs


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
    """python/r2sp/ from `package_dir` (no caches, no extension built elsewhere), `core` as
    python/r2sp/_core.so and, when built beside it, _models.so (the built-in models' initial
    values); the libraries the extensions load (when they are ELF files)."""
    target = os.path.join(out_dir, "python", "r2sp")
    shutil.copytree(package_dir, target,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_core*.so",
                                                  "_models*.so"))
    extensions = [core]
    models = os.path.join(os.path.dirname(core), "_models.so")
    if os.path.isfile(models):
        extensions.append(models)
    libraries = {}
    for built in extensions:
        copied = os.path.join(target, os.path.basename(built))
        shutil.copyfile(built, copied)
        os.chmod(copied, 0o755)
        if not glibc_needs.is_elf(copied):
            continue
        _set_rpath(copied, "$ORIGIN/../../lib")
        libraries.update(shared_libraries(built))
    return libraries


def _copy_worker_files(out_dir, paths):
    target = os.path.join(out_dir, "worker_files")
    os.makedirs(target)
    for path in paths:
        name = os.path.join(target, os.path.basename(os.path.normpath(path)))
        if os.path.isdir(path):
            shutil.copytree(path, name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, name)  # its mode too: a script stays executable


def _copy_programs(out_dir, binaries, carry_glibc):
    """Copies `binaries` into the bundle: ELF programs into libexec/ when a C library is carried
    (bin/ gets their wrappers later), else into bin/, their RPATH ../lib; other files into bin/
    as they are. Returns (ELF program names, {soname: path} of the libraries to bundle,
    {soname: path} of everything they load)."""
    programs, libs, loaded = [], {}, {}
    for name, source in sorted(binaries.items()):
        elf = glibc_needs.is_elf(source)
        directory = carried_glibc.PROGRAM_DIR if elf and carry_glibc else "bin"
        target = os.path.join(out_dir, directory, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(source, target)
        os.chmod(target, 0o755)
        if elf:
            programs.append(name)
            loaded.update(_ldd(source))
            libs.update(shared_libraries(source))
            _set_rpath(target, "$ORIGIN/../lib")
    return programs, libs, loaded


def _copy_libraries(lib_dir, libs):
    """Copies each library not yet in lib_dir (the real file under its soname), RPATH $ORIGIN."""
    for name, source in sorted(libs.items()):
        target = os.path.join(lib_dir, name)
        if os.path.exists(target):
            continue
        shutil.copyfile(source, target)  # follows the symlink: the real file under the soname
        os.chmod(target, 0o755)
        _set_rpath(target, "$ORIGIN")


def _glibc_fields(out_dir, programs, loaded, carry_glibc):
    """Carries the C library (when asked and there are ELF programs) and writes the programs'
    wrappers; checks the floor the bundle promises (carried_glibc.check_floor). Returns the
    manifest's glibc fields; BundleError when the files break the promise."""
    native = glibc_needs.newest(
        [os.path.join(out_dir, rel) for rel in glibc_needs.needs(out_dir)])
    carried = ""
    if carry_glibc and programs:
        try:
            carried = carried_glibc.carry(os.path.join(out_dir, carried_glibc.CARRIED_DIR),
                                          carried_glibc.c_library_dir(loaded))
        except ValueError as e:
            raise BundleError(str(e)) from None
        for name in programs:
            carried_glibc.write_wrapper(os.path.join(out_dir, "bin"), name, native)
    promise = carried_glibc.PROMISED_FLOOR if carried else native
    problems = carried_glibc.check_floor(out_dir, promise, carried)
    if problems:
        raise BundleError(f"the bundle would not run on glibc {promise}, which MANIFEST.json "
                          "would promise: " + "; ".join(problems))
    return {"glibc_min": promise, "glibc_native": native, "glibc_carried": carried}


def make(out_dir, binaries, version, variant, commit, deploy_dir=None, env_sh=None,
         python_package=None, worker_files=(), carry_glibc=True):
    """Builds the bundle directory `out_dir` (replaced if it exists) from `binaries`
    ({name in bin/: source path}; ELF files get their RPATH set and their libraries copied,
    others are copied as they are). python_package: (the r2sp package's directory, its
    _core.so) for python/r2sp/; worker_files: paths (files or directories) for worker_files/;
    carry_glibc: carry this machine's C library for older hosts (carried_glibc.py), the ELF
    programs in libexec/ behind wrappers in bin/. Returns the manifest."""
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
    lib_dir = os.path.join(out_dir, "lib")
    os.makedirs(os.path.join(out_dir, "bin"))
    os.makedirs(lib_dir)
    programs, libs, loaded = _copy_programs(out_dir, binaries, carry_glibc)
    _copy_libraries(lib_dir, libs)
    if python_package:
        _copy_libraries(lib_dir, _copy_python_package(out_dir, *python_package))
    if worker_files:
        _copy_worker_files(out_dir, worker_files)
    if deploy_dir:
        shutil.copytree(deploy_dir, os.path.join(out_dir, "share", "r2sp", "deploy"))
    if env_sh:
        shutil.copyfile(env_sh, os.path.join(out_dir, "env.sh"))
    manifest = {"version": version, "variant": variant, "commit": commit}
    manifest.update(_glibc_fields(out_dir, programs, loaded, carry_glibc))
    manifest["files"] = {
        os.path.relpath(os.path.join(root, n), out_dir): sha256(os.path.join(root, n))
        for root, _, names in os.walk(out_dir) for n in sorted(names)}
    with open(os.path.join(out_dir, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    return manifest


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

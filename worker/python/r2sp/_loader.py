"""Finds and loads the C++ extension `_core` (//worker/python:_core.so) for the r2sp package, and
the extensions built beside it (`_models`, //worker/python:_models.so)."""

import glob
import importlib.machinery
import importlib.util
import os
import sys

BUILD_HINT = ("build it with `bazel build //worker/python:_core.so` (from the repository root), "
              "or set R2SP_CORE to the path of a _core.so")


def rebuild_hint(python):
    """How to build the extension for the interpreter `python`."""
    return (f"for this interpreter: `bazel build --repo_env=R2SP_PYTHON={python} "
            "//worker/python:_core.so`")


def candidates(package_dir, environ):
    """The places the extension may be, in the order they are tried: [(path, why)].

    A `_core*.so` inside the package (the release bundle), else $R2SP_CORE, else
    `<repo>/bazel-bin/worker/python/_core.so`, the package being `<repo>/worker/python/r2sp`."""
    found = [(path, "inside the package")
             for path in sorted(glob.glob(os.path.join(package_dir, "_core*.so")))]
    if environ.get("R2SP_CORE"):
        found.append((environ["R2SP_CORE"], "R2SP_CORE"))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(package_dir))))
    built = os.path.join(repo, "bazel-bin", "worker", "python", "_core.so")
    found.append((built, "the build tree"))
    return found


def host_glibc():
    """This host's glibc version ('2.36'), or 'unknown'."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "glibc unknown").split()[-1]
    except (ValueError, OSError):
        return "unknown"


def find_core(package_dir, environ):
    """The path of the extension to load; ImportError saying where it looked and what to build.

    $R2SP_CORE naming a file that is not there is an error of its own (no silent fallback to
    another build)."""
    tried = []
    for path, why in candidates(package_dir, environ):
        if os.path.isfile(path):
            return path
        if why == "R2SP_CORE":
            raise ImportError(f"r2sp: R2SP_CORE={path} is not a file; {BUILD_HINT}")
        tried.append(path)
    raise ImportError("r2sp: cannot find the C++ extension _core.so (looked for "
                      + ", ".join(tried) + f"); {BUILD_HINT}")


def load_core(package_name, package_dir, environ=None):
    """Loads the extension as `<package_name>._core` (registered in sys.modules) and returns it.

    A module of that name already in sys.modules is returned as it is."""
    name = package_name + "._core"
    if name in sys.modules:
        return sys.modules[name]
    return _load(name, find_core(package_dir, os.environ if environ is None else environ))


def load_beside(package_name, module, core):
    """Loads the extension `module` (e.g. "_models") as `<package_name>.<module>` from the
    directory the loaded `core` came from (the build tree's, or the package's in the bundle);
    ImportError saying what to build when it is not there."""
    name = f"{package_name}.{module}"
    if name in sys.modules:
        return sys.modules[name]
    directory = os.path.dirname(os.path.abspath(core.__file__))
    found = sorted(glob.glob(os.path.join(directory, module + "*.so")))
    if not found:
        raise ImportError(f"r2sp: cannot find the C++ extension {module}.so beside "
                          f"{core.__file__}; build it with `bazel build "
                          f"//worker/python:{module}.so` (from the repository root)")
    return _load(name, found[0])


def _load(name, path):
    """The extension at `path`, loaded as `name` and registered in sys.modules."""
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as e:
        if "GLIBC_" in str(e):
            raise ImportError(f"r2sp: cannot load the C++ extension {path}: {e} (it was built "
                              "on a system whose C library is newer than this host's glibc "
                              f"{host_glibc()}: build it, or the wheel, on a system at least "
                              "as old as this one)") from e
        raise ImportError(f"r2sp: cannot load the C++ extension {path}: {e} (was it built for "
                          f"this Python, {sys.version.split()[0]}? {BUILD_HINT}; "
                          f"{rebuild_hint(sys.executable)})") from e
    sys.modules[name] = module
    return module

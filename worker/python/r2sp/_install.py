"""Where this r2sp was installed from, and what comes with it: a wheel (tools/package --wheel:
the version in r2sp/_version.py, the programs and the launcher's library under r2sp/_launch/)
or a source checkout (worker/python/r2sp: the version in VERSION, the programs in bazel-bin,
the launcher's library in tools/pylib)."""

import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
LAUNCH_DIR = os.path.join(PACKAGE_DIR, "_launch")
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(PACKAGE_DIR)))


def from_wheel():
    return os.path.isdir(LAUNCH_DIR)


def version():
    """This build's version: the wheel's, or the checkout's VERSION file ('unknown' if none)."""
    try:
        from ._version import VERSION
        return VERSION
    except ImportError:
        pass
    try:
        with open(os.path.join(CHECKOUT, "VERSION")) as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def tools_dir():
    """The directory holding the launcher's library (pylib/)."""
    return os.path.join(LAUNCH_DIR if from_wheel() else CHECKOUT, "tools")


def bin_dir(environ=None):
    """Where the programs are (the scheduler and server; a checkout has the worker too):
    $R2SP_BIN_DIR, the wheel's bin/
    (BIN_DIR/ROLE), or the checkout's bazel-bin (BIN_DIR/ROLE/ROLE)."""
    environ = os.environ if environ is None else environ
    if environ.get("R2SP_BIN_DIR"):
        return environ["R2SP_BIN_DIR"]
    if from_wheel():
        return os.path.join(LAUNCH_DIR, "bin")
    return os.path.join(CHECKOUT, "bazel-bin")

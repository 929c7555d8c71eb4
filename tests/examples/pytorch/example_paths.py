"""What the examples' tests share: where examples/pytorch is (beside tests/ in the source tree
and in Bazel's runfiles), and running a test under the Python that has torch."""

import importlib.util
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
EXAMPLES = os.path.join(ROOT, "examples", "pytorch")
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch and python3-torchvision


def use_torch_python():
    """Re-runs this test under /usr/bin/python3 when this Python has no torch and that one
    exists; afterwards, r2sp_examples imports. Returns whether torch can be imported."""
    if importlib.util.find_spec("torch") is None and os.path.exists(TORCH_PYTHON) \
            and os.path.realpath(sys.executable) != os.path.realpath(TORCH_PYTHON):
        os.execv(TORCH_PYTHON, [TORCH_PYTHON] + sys.argv)
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    return importlib.util.find_spec("torch") is not None


NO_TORCH = "no Python with torch here (Debian's python3-torch at /usr/bin/python3)"

"""r2sp: the Python client of R2SP. `r2sp.torch` trains a PyTorch model through an R2SP job
(docs/PYTORCH.md); `r2sp.run` is r2sp-run, which launches a script as torchrun does. The C++
worker extension `r2sp._core` (built by `bazel build //worker/python:_core.so`, inside the
package in the wheel) loads when first used, with its errors R2SPError and JobLost: r2sp.torch
uses it, the launcher does not. builtin_parameters() gives the C++ worker's built-in models'
initial values (from `r2sp._models`, built beside `_core`)."""

import os as _os

from . import _install
from ._loader import load_beside as _load_beside
from ._loader import load_core as _load_core

__version__ = _install.version()
_EXTENSION_NAMES = ("_core", "R2SPError", "JobLost")


def __getattr__(name):
    """_core, and R2SPError (a C++ error: str() is the Status message, .code its code name) and
    JobLost (this worker was lost to the job: scheduler gone, declared dead, ...) from it,
    loaded on first use; ImportError saying what to build when it cannot load."""
    if name not in _EXTENSION_NAMES:
        raise AttributeError(f"module 'r2sp' has no attribute {name!r}")
    core = _load_core(__name__, _os.path.dirname(_os.path.abspath(__file__)))
    globals().update(_core=core, R2SPError=core.R2SPError, JobLost=core.JobLost)
    return globals()[name]


def builtin_parameters(model, input_chw, num_classes, seed):
    """[(name, shape, raw fp32 bytes)] of the C++ worker's built-in `model` (mlp, cnn,
    resnet20) for inputs of (channels, height, width) and `num_classes`, initialised from `seed`
    as a C++ worker with that --seed starts the job. ValueError for an unknown model."""
    return _load_beside(__name__, "_models", __getattr__("_core")).builtin_parameters(
        model, list(input_chw), num_classes, seed)


__all__ = ["__version__", "R2SPError", "JobLost", "builtin_parameters"]

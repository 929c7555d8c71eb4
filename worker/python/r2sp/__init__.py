"""r2sp: the Python client of R2SP. Loads the C++ worker extension `r2sp._core` (built by
`bazel build //worker/python:_core.so`) and re-exports its errors; `r2sp.torch` trains a
PyTorch model through an R2SP job (docs/PYTORCH.md). builtin_parameters() gives the C++
worker's built-in models' initial values (from `r2sp._models`, built beside `_core`)."""

import os as _os

from . import _install
from ._loader import load_beside as _load_beside
from ._loader import load_core as _load_core

_core = _load_core(__name__, _os.path.dirname(_os.path.abspath(__file__)))

__version__ = _install.version()
R2SPError = _core.R2SPError  # a C++ error: str() is the Status message, .code its code name
JobLost = _core.JobLost      # this worker was lost to the job (scheduler gone, declared dead, ...)


def builtin_parameters(model, input_chw, num_classes, seed):
    """[(name, shape, raw fp32 bytes)] of the C++ worker's built-in `model` (mlp, cnn,
    resnet20) for inputs of (channels, height, width) and `num_classes`, initialised from `seed`
    as a C++ worker with that --seed starts the job. ValueError for an unknown model."""
    return _load_beside(__name__, "_models", _core).builtin_parameters(
        model, list(input_chw), num_classes, seed)


__all__ = ["__version__", "R2SPError", "JobLost", "builtin_parameters"]

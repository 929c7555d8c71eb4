"""r2sp: the Python client of R2SP. Loads the C++ worker extension `r2sp._core` (built by
`bazel build //worker/python:_core.so`) and re-exports its errors; `r2sp.torch` trains a
PyTorch model through an R2SP job (docs/PYTORCH.md)."""

import os as _os

from ._loader import load_core as _load_core

_core = _load_core(__name__, _os.path.dirname(_os.path.abspath(__file__)))

R2SPError = _core.R2SPError  # a C++ error: str() is the Status message, .code its code name
JobLost = _core.JobLost      # this worker was lost to the job (scheduler gone, declared dead, ...)

__all__ = ["R2SPError", "JobLost"]

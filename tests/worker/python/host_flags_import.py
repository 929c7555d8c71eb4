"""core_test's host process with gflags of its own: loads host_flags.so (which defines --lr)
into the global namespace, then imports r2sp._core and creates a worker whose options set lr.
Prints the host's --lr after each, and the worker's size.

usage: host_flags_import.py CORE_DIR HOST_FLAGS_SO"""

import ctypes
import sys

core_dir, host_so = sys.argv[1], sys.argv[2]
host = ctypes.CDLL(host_so, mode=ctypes.RTLD_GLOBAL)
host.HostLearningRate.restype = ctypes.c_double
print(f"host lr before: {host.HostLearningRate()}")
sys.path.insert(0, core_dir)
import _core  # noqa: E402

worker = _core.Worker({"lr": 0.5, "scheduler": "tcp://127.0.0.1:9"}, [("w", [3])])
print(f"host lr after: {host.HostLearningRate()}")
print(f"worker size: {worker.size}")

# Source me (from an unpacked release bundle): puts the bundle's bin/ on PATH and this machine's
# CUDA libraries (the toolkit's, or the NVIDIA pip wheels PyTorch installs) on the library path.
# The bundled libraries need no path: the binaries' RPATH finds them.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cuda_libs="$(python3 - <<'PY' 2>/dev/null
import glob, os, importlib.util
dirs = []
spec = importlib.util.find_spec("nvidia")
for base in (spec.submodule_search_locations if spec else []):
    dirs += sorted(d for d in glob.glob(os.path.join(base, "*", "lib")) if os.path.isdir(d))
    dirs += sorted(d for d in glob.glob(os.path.join(base, "cu13", "lib")) if os.path.isdir(d))
print(":".join(dirs))
PY
)"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"

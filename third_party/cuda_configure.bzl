"""Repository rule that exposes a local CUDA toolkit, or an empty stand-in without one.

The generated repository always has:
  //:defs.bzl   HAS_CUDA (bool), NVCC (path or "") and NVCC_FLAGS (every project kernel's:
                the GPUs it is built for)
  //:cuda       cc_library with the headers and cudart/cudnn/cublas (empty without CUDA)
CUDA is looked up at $CUDA_PATH, else /usr/local/cuda.
"""

# Data-centre GPUs from Ampere on (sm_80 A100, sm_86 A10G, sm_89 L4, sm_90 H100/H200) plus PTX
# for newer ones. One list for every kernel: an object built for fewer GPUs than the rest
# fails to launch ("no kernel image") on the ones it lacks.
_NVCC_FLAGS = " ".join([
    "-O3",
    "-std=c++17",
    "-Xcompiler -fPIC",
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_86,code=sm_86",
    "-gencode arch=compute_89,code=sm_89",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
])

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(root + "/bin/nvcc")
    has_cuda = nvcc.exists and ctx.path(root + "/include/cuda_runtime.h").exists
    if has_cuda:
        for entry in ["include", "lib64", "bin"]:
            ctx.symlink(root + "/" + entry, entry)
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp"]),
    includes = ["include"],
    linkopts = [
        "-L{root}/lib64",
        "-Wl,-rpath,{root}/lib64",
        "-lcudnn",
        "-lcublas",
        "-lcudart",
    ],
)

exports_files(["bin/nvcc"])
""".format(root = root))
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda")
""")
    ctx.file("defs.bzl", "HAS_CUDA = {}\nNVCC = \"{}\"\nNVCC_FLAGS = \"{}\"\n".format(
        has_cuda,
        str(nvcc) if has_cuda else "",
        _NVCC_FLAGS,
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)

"""Repository rule that exposes a local CUDA toolkit, or an empty stand-in without one.

The generated repository always has:
  //:defs.bzl   HAS_CUDA (bool) and NVCC (path or "")
  //:cuda       cc_library with the headers and cudart/cudnn/cublas (empty without CUDA)
CUDA is looked up at $CUDA_PATH, else /usr/local/cuda.
"""

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
    ctx.file("defs.bzl", "HAS_CUDA = {}\nNVCC = \"{}\"\n".format(
        has_cuda,
        str(nvcc) if has_cuda else "",
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)

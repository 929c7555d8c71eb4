"""Repository rule that exposes the headers of the Python the client's extension is built for.

The extension (//worker/python:_core.so) loads only into the Python version whose headers it
was compiled against, so the interpreter is chosen at build time:
  bazel build --repo_env=R2SP_PYTHON=/path/to/python3 //worker/python:_core.so
Without R2SP_PYTHON it is Debian's /usr/bin/python3 (python3-dev), else python3 on PATH.
The generated repository has:
  //:python_headers   cc_library with that interpreter's include directory
  //:defs.bzl         PYTHON (the interpreter) and PYTHON_VERSION ("3.11", ...)
An interpreter that cannot be run, or whose include directory lacks Python.h, fails the build
with a message naming it.
"""

_QUERY = "import sys, sysconfig; print(sysconfig.get_paths()['include']); print('%d.%d' % sys.version_info[:2])"

def _interpreter(ctx):
    chosen = ctx.os.environ.get("R2SP_PYTHON", "")
    if chosen:
        return chosen
    if ctx.path("/usr/bin/python3").exists:
        return "/usr/bin/python3"
    found = ctx.which("python3")
    if found == None:
        fail("python_configure: no python3 found; set --repo_env=R2SP_PYTHON=/path/to/python3")
    return str(found)

def _python_configure_impl(ctx):
    python = _interpreter(ctx)
    result = ctx.execute([python, "-c", _QUERY])
    if result.return_code != 0:
        fail("python_configure: cannot run R2SP_PYTHON={} ({})".format(python, result.stderr.strip()))
    include, version = result.stdout.strip().split("\n")
    if not ctx.path(include + "/Python.h").exists:
        fail("python_configure: {} has no Python.h in {} (install its headers: python3-dev)".format(
            python,
            include,
        ))
    ctx.symlink(include, "include")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# Python {version}'s headers ({python}).
cc_library(
    name = "python_headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
)
""".format(version = version, python = python))
    ctx.file("defs.bzl", "PYTHON = \"{}\"\nPYTHON_VERSION = \"{}\"\n".format(python, version))

python_configure = repository_rule(
    implementation = _python_configure_impl,
    environ = ["R2SP_PYTHON"],
    local = True,
)

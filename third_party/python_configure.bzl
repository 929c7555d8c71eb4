"""Repository rule that exposes the headers of the Python the client's extension is built for.

The extension (//worker/python:_core.so) loads only into the Python version whose headers it
was compiled against, so the interpreter is chosen at build time:
  bazel build --repo_env=R2SP_PYTHON=/path/to/python3 //worker/python:_core.so
Without R2SP_PYTHON it is Debian's /usr/bin/python3 (python3-dev), else python3 on PATH.
The generated repository has:
  //:python_headers   cc_library with that interpreter's include directory, and two Debian
                      layouts beside it when there: the multiarch pyconfig.h its pyconfig.h
                      includes (INCLUDE/../x86_64-linux-gnu/python3.X) and pybind11-dev's headers
                      (INCLUDE/../pybind11), searched before /usr/include's. So an interpreter in
                      another root file system (tools/torch2_root) builds against its own
                      release's headers, pybind11 included.
  //:defs.bzl         PYTHON (the interpreter) and PYTHON_VERSION ("3.11", ...)
An interpreter that cannot be run, or whose include directory lacks Python.h, fails the build
with a message naming it.
"""

_QUERY = "import sys, sysconfig; print(sysconfig.get_paths()['include']); print('%d.%d' % sys.version_info[:2]); print(sysconfig.get_config_var('MULTIARCH') or '')"

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
    include, version, multiarch = (result.stdout.strip("\n").split("\n") + [""])[:3]
    if not ctx.path(include + "/Python.h").exists:
        fail("python_configure: {} has no Python.h in {} (install its headers: python3-dev)".format(
            python,
            include,
        ))
    ctx.symlink(include, "include")
    includes = ["include"]
    parent = ctx.path(include).dirname
    pyconfig = parent.get_child(multiarch).get_child("python" + version) if multiarch else None
    if pyconfig and pyconfig.exists:
        ctx.symlink(pyconfig, "multiarch/{}/python{}".format(multiarch, version))
        includes.append("multiarch")
    if parent.get_child("pybind11").get_child("pybind11.h").exists:
        ctx.symlink(parent.get_child("pybind11"), "pybind11/pybind11")
        includes.append("pybind11")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# Python {version}'s headers ({python}).
cc_library(
    name = "python_headers",
    hdrs = glob(["include/**/*.h", "multiarch/**/*.h", "pybind11/**/*.h"]),
    includes = {includes},
)
""".format(version = version, python = python, includes = includes))
    ctx.file("defs.bzl", "PYTHON = \"{}\"\nPYTHON_VERSION = \"{}\"\n".format(python, version))

python_configure = repository_rule(
    implementation = _python_configure_impl,
    environ = ["R2SP_PYTHON"],
    local = True,
)

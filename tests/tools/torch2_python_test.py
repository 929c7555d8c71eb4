"""tools/torch2_python against a stand-in root (its marker and an r2sp-python3 that prints how it
was called) and a stand-in bazel (records its arguments, then makes the extension or fails as
$FAIL says), in a scratch output base ($R2SP_TORCH2_OUTPUT_BASE): --check says what is missing
(exit 3 without the root, 4 without the extension or with one older than the checkout's C++
sources) and prints the extension's path once built;
--build runs Bazel for the root's Python in that output base, and a failed build leaves no
extension for --check to find; a script runs under the root's Python with this checkout's
package and the extension built for it, whatever R2SP_CORE it was given."""

import os
import subprocess
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "torch2_python")
# The checkout the tool runs from (tests run it through the runfiles' link to it).
CHECKOUT = os.path.dirname(os.path.dirname(os.path.realpath(TOOL)))
BAZEL = """#!/bin/sh
echo "$(pwd) $*" >>"$CALLS"
if [ -n "${FAIL:-}" ]; then echo "ERROR: $FAIL" >&2; exit 1; fi
base="${1#--output_base=}"
bin="$base/execroot/r2sp/bazel-out/k8-fastbuild/bin/worker/python"
mkdir -p "$bin" && touch "$bin/_core.so" "$bin/_models.so"
"""
PYTHON = """#!/bin/sh
echo "python: $*"
echo "R2SP_CORE=$R2SP_CORE"
echo "PYTHONPATH=$PYTHONPATH"
"""


class Torch2PythonTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        fake = os.path.join(self.dir, "fake")
        os.makedirs(fake)
        self.write(os.path.join(fake, "bazel"), BAZEL)
        self.root = os.path.join(self.dir, "root")
        self.python = os.path.join(self.root, "usr", "local", "bin", "r2sp-python3")
        self.output_base = os.path.join(self.dir, "output_base")
        self.core = os.path.join(self.output_base, "execroot", "r2sp", "bazel-out",
                                 "k8-fastbuild", "bin", "worker", "python", "_core.so")
        self.calls = os.path.join(self.dir, "calls")
        self.env = {"PATH": f"{fake}:/usr/bin:/bin", "CALLS": self.calls,
                    "R2SP_TORCH2_ROOT": self.root, "R2SP_TORCH2_OUTPUT_BASE": self.output_base}

    def write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)

    def make_root(self):
        self.write(self.python, PYTHON)
        self.write(os.path.join(self.root, ".r2sp_root"), "trixie\n")

    def run_tool(self, *argv, **env):
        return subprocess.run([TOOL, *argv], capture_output=True, text=True, timeout=60,
                              env=dict(self.env, **env))

    def calls_made(self):
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as f:
            return f.read().splitlines()

    def test_check_says_what_is_missing(self):
        r = self.run_tool("--check")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (
            3, "", f"torch2_python: no PyTorch 2 root file system at {self.root} (make it with "
            "tools/torch2_root, as root; or set R2SP_TORCH2_ROOT)\n"))
        self.make_root()
        r = self.run_tool("--check")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (
            4, "", f"torch2_python: the extension is not built for {self.python} "
            "(tools/torch2_python --build)\n"))
        self.assertEqual(self.run_tool("script.py").returncode, 4)
        self.assertEqual(self.calls_made(), [])

    def test_build_in_an_output_base_of_its_own_then_check(self):
        self.make_root()
        r = self.run_tool("--build")
        self.assertEqual((r.returncode, r.stdout), (0, self.core + "\n"), r.stderr)
        self.assertEqual(self.calls_made(), [
            f"{CHECKOUT} --output_base={self.output_base} --max_idle_secs=60 build "
            f"--experimental_convenience_symlinks=ignore --repo_env=R2SP_PYTHON={self.python} "
            "//worker/python:_core.so //worker/python:_models.so"])
        r = self.run_tool("--check")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, self.core + "\n", ""))

    def test_an_extension_older_than_the_sources_is_not_used(self):
        self.make_root()
        self.assertEqual(self.run_tool("--build").returncode, 0)
        os.utime(os.path.join(self.output_base, "r2sp_torch2_built"), (0, 0))  # built in 1970
        r = self.run_tool("--check")
        self.assertEqual((r.returncode, r.stdout), (4, ""))
        self.assertRegex(r.stderr, r"^torch2_python: the extension is older than "
                         r"(common|models|proto|worker|third_party)/\S+ "
                         r"\(tools/torch2_python --build\)\n$")
        self.assertEqual(self.run_tool("--build").returncode, 0)
        self.assertEqual(self.run_tool("--check").returncode, 0)

    def test_a_failed_build_leaves_no_extension(self):
        self.make_root()
        self.assertEqual(self.run_tool("--build").returncode, 0)
        r = self.run_tool("--build", FAIL="core_module.cc: error")
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertTrue(r.stderr.endswith(
            f"ERROR: core_module.cc: error\ntorch2_python: the build for {self.python} failed\n"),
            r.stderr)
        self.assertEqual(self.run_tool("--check").returncode, 4)

    def test_a_script_runs_with_the_package_and_the_extension_built_for_it(self):
        self.make_root()
        self.assertEqual(self.run_tool("--build").returncode, 0)
        r = self.run_tool("train.py", "--epochs=1", R2SP_CORE="/elsewhere/_core.so",
                          PYTHONPATH="/mine")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"python: train.py --epochs=1\nR2SP_CORE={self.core}\n"
                         f"PYTHONPATH={CHECKOUT}/worker/python:/mine\n")

    def test_without_the_root(self):
        for argv in (["--build"], ["train.py"]):
            with self.subTest(argv=argv):
                r = self.run_tool(*argv)
                self.assertEqual((r.returncode, r.stdout), (3, ""))
                self.assertIn("no PyTorch 2 root file system", r.stderr)
        self.assertEqual(self.calls_made(), [])


if __name__ == "__main__":
    junit_main.main()

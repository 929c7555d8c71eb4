"""tools/torch2_root with a stand-in debootstrap (no download) that makes a root of stand-ins: a
dynamic loader that prints how it was called, python3 -> python3.13, an alternative (an absolute
link through /etc/alternatives) and the multiarch pyconfig.h folder. The tool makes the root
once with the suite, mirror and packages given, then keeps it; its r2sp-python3 runs the root's
python3 through the root's loader with the alternative's folder first, then the root's library
folders, then the host's, still when the root is moved; a failed debootstrap, or a root whose
Python cannot import torch, leaves no root; bad arguments exit 2. Root only (the tool refuses
others)."""

import os
import subprocess
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "torch2_root")
LIB = "usr/lib/x86_64-linux-gnu"
# Records its arguments in $CALLS, then makes a root of stand-ins in TARGET ($4), or fails as
# $FAIL says. The loader prints its arguments and CPLUS_INCLUDE_PATH; with $NO_TORCH it fails
# as a Python without torch would.
DEBOOTSTRAP = f"""#!/bin/sh
echo "$*" >>"$CALLS"
if [ -n "${{FAIL:-}}" ]; then echo "E: $FAIL"; exit 1; fi
root="$4"
mkdir -p "$root/{LIB}/openblas-pthread" "$root/usr/bin" "$root/etc/alternatives" \\
  "$root/usr/include/x86_64-linux-gnu/python3.13"
cat >"$root/{LIB}/ld-linux-x86-64.so.2" <<'EOF'
#!/bin/sh
if [ -n "${{NO_TORCH:-}}" ]; then
  echo "ModuleNotFoundError: No module named 'torch'" >&2; exit 1
fi
echo "loader: $*"
echo "CPLUS_INCLUDE_PATH=$CPLUS_INCLUDE_PATH"
EOF
chmod 755 "$root/{LIB}/ld-linux-x86-64.so.2"
echo python >"$root/usr/bin/python3.13"
ln -s python3.13 "$root/usr/bin/python3"
touch "$root/{LIB}/openblas-pthread/libblas.so.3" "$root/{LIB}/libc.so.6"
ln -s /{LIB}/openblas-pthread/libblas.so.3 "$root/etc/alternatives/libblas.so.3-x86_64-linux-gnu"
ln -s /etc/alternatives/libblas.so.3-x86_64-linux-gnu "$root/{LIB}/libblas.so.3"
ln -s libc.so.6 "$root/{LIB}/libc.so"
"""


@unittest.skipUnless(os.geteuid() == 0, "tools/torch2_root runs as root only")
class Torch2RootTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        fake = os.path.join(self.dir, "fake")
        os.makedirs(fake)
        with open(os.path.join(fake, "debootstrap"), "w") as f:
            f.write(DEBOOTSTRAP)
        os.chmod(os.path.join(fake, "debootstrap"), 0o755)
        self.calls = os.path.join(self.dir, "calls")
        self.env = {"PATH": f"{fake}:/usr/sbin:/usr/bin:/sbin:/bin", "CALLS": self.calls}
        self.root = os.path.join(self.dir, "cache", "torch2")

    def run_tool(self, *argv, **env):
        return subprocess.run([TOOL, *argv], capture_output=True, text=True, timeout=60,
                              env=dict(self.env, **env))

    def calls_made(self):
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as f:
            return f.read().splitlines()

    def python(self, root, *argv):
        """What the stand-in loader printed for root's r2sp-python3 run with argv."""
        launcher = os.path.join(root, "usr", "local", "bin", "r2sp-python3")
        return subprocess.run([launcher, *argv], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin"}, check=True).stdout

    def test_made_once_then_kept(self):
        for _ in range(2):
            r = self.run_tool(self.root, "--suite=sid", "--mirror=http://mirror.example/debian")
            self.assertEqual((r.returncode, r.stdout), (0, self.root + "\n"), r.stderr)
        self.assertEqual(self.calls_made(), [
            "--variant=minbase --include=python3,python3-torch,python3-numpy,python3-dev,"
            "pybind11-dev,libtorch-dev,libopenblas0-pthread sid "
            f"{self.root}.partial http://mirror.example/debian"])
        with open(os.path.join(self.root, ".r2sp_root")) as f:
            self.assertEqual(f.read(), "sid\n")
        self.assertEqual(sorted(os.listdir(os.path.dirname(self.root))), ["torch2"])

    def test_its_python_runs_through_the_roots_loader_with_the_roots_libraries_first(self):
        self.assertEqual(self.run_tool(self.root).returncode, 0)
        moved = os.path.join(self.dir, "moved")
        os.rename(self.root, moved)  # the launcher finds the root from where it is
        launcher = os.path.join(moved, "usr", "local", "bin", "r2sp-python3")
        lib = os.path.join(moved, LIB)
        search = [os.path.join(lib, "openblas-pthread"),  # the alternative's folder
                  f"{moved}/usr/local/lib/x86_64-linux-gnu", f"{moved}/usr/local/lib", lib,
                  f"{moved}/usr/lib", "/usr/local/lib/x86_64-linux-gnu", "/usr/local/lib",
                  "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"]
        include = f"{moved}/usr/local/lib/r2sp/include"
        self.assertEqual(self.python(moved, "-c", "print(1)"),
                         f"loader: --argv0 {launcher} --library-path {':'.join(search)} "
                         f"{moved}/usr/bin/python3 -c print(1)\nCPLUS_INCLUDE_PATH={include}\n")
        # The host's g++ finds the root's multiarch pyconfig.h (torch.compile's kernels).
        self.assertEqual(
            os.path.realpath(os.path.join(include, "x86_64-linux-gnu", "python3.13")),
            os.path.join(moved, "usr", "include", "x86_64-linux-gnu", "python3.13"))

    def test_another_suite_or_a_half_made_root_is_made_again(self):
        os.makedirs(self.root)  # no marker: an interrupted run
        self.assertEqual(self.run_tool(self.root).returncode, 0)
        self.assertEqual(self.run_tool(self.root, "--suite=sid").returncode, 0)
        self.assertEqual([c.split()[2] for c in self.calls_made()], ["trixie", "sid"])

    def test_a_failed_debootstrap_leaves_no_root(self):
        r = self.run_tool(self.root, FAIL="Failed getting release file")
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertTrue(r.stderr.endswith(f"torch2_root: debootstrap failed; the end of its log "
                                          f"({self.root}.partial.log):\nE: Failed getting release "
                                          "file\n"), r.stderr)
        self.assertFalse(os.path.exists(self.root))

    def test_a_root_whose_python_cannot_import_torch_is_not_kept(self):
        r = self.run_tool(self.root, NO_TORCH="1")
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertTrue(r.stderr.endswith("torch2_root: the root's Python cannot import torch "
                                          "from the host:\nModuleNotFoundError: No module named "
                                          "'torch'\n"), r.stderr)
        self.assertFalse(os.path.exists(self.root))
        self.assertEqual(self.run_tool(self.root).returncode, 0)  # made whole the next time

    def test_bad_arguments(self):
        r = self.run_tool("--sute=trixie")
        self.assertEqual((r.returncode, r.stdout, r.stderr),
                         (2, "", "torch2_root: unknown argument --sute=trixie (see --help)\n"))


if __name__ == "__main__":
    junit_main.main()

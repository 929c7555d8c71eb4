"""tools/old_glibc_root with a stand-in debootstrap (no download): it makes the root once, with
minbase and python3 from the suite and mirror given, then keeps it; a failed debootstrap leaves
no root and shows the end of its log; bad arguments exit 2. Root only (the tool refuses others)."""

import os
import subprocess
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "old_glibc_root")
# Records its arguments in $CALLS, then makes TARGET ($4) or fails as $FAIL says.
DEBOOTSTRAP = """#!/bin/sh
echo "$*" >>"$CALLS"
if [ -n "${FAIL:-}" ]; then echo "E: $FAIL"; exit 1; fi
mkdir -p "$4/usr/bin" && echo 2.31 >"$4/usr/bin/marker"
"""


@unittest.skipUnless(os.geteuid() == 0, "tools/old_glibc_root runs as root only")
class OldGlibcRootTest(unittest.TestCase):
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
        self.root = os.path.join(self.dir, "cache", "old")

    def run_tool(self, *argv, **env):
        return subprocess.run([TOOL, *argv], capture_output=True, text=True, timeout=60,
                              env=dict(self.env, **env))

    def calls_made(self):
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as f:
            return f.read().splitlines()

    def test_made_once_then_kept(self):
        for _ in range(2):
            r = self.run_tool(self.root, "--suite=buster", "--mirror=http://mirror.example/debian")
            self.assertEqual((r.returncode, r.stdout), (0, self.root + "\n"), r.stderr)
        self.assertEqual(self.calls_made(), [f"--variant=minbase --include=python3 buster "
                                             f"{self.root}.partial http://mirror.example/debian"])
        with open(os.path.join(self.root, ".r2sp_root")) as f:
            self.assertEqual(f.read(), "buster\n")
        self.assertTrue(os.path.isfile(os.path.join(self.root, "usr", "bin", "marker")))
        self.assertEqual(sorted(os.listdir(os.path.dirname(self.root))), ["old"])

    def test_another_suite_or_a_half_made_root_is_made_again(self):
        os.makedirs(self.root)  # no marker: an interrupted run
        self.assertEqual(self.run_tool(self.root).returncode, 0)
        self.assertEqual(self.run_tool(self.root, "--suite=buster").returncode, 0)
        self.assertEqual([c.split()[2] for c in self.calls_made()], ["bullseye", "buster"])

    def test_a_failed_debootstrap_leaves_no_root(self):
        r = self.run_tool(self.root, FAIL="Failed getting release file")
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertTrue(r.stderr.endswith(f"old_glibc_root: debootstrap failed; the end of its log "
                                          f"({self.root}.partial.log):\nE: Failed getting release "
                                          "file\n"), r.stderr)
        self.assertFalse(os.path.exists(self.root))

    def test_bad_arguments(self):
        r = self.run_tool("--sute=bullseye")
        self.assertEqual((r.returncode, r.stdout, r.stderr),
                         (2, "", "old_glibc_root: unknown argument --sute=bullseye (see --help)\n"))


if __name__ == "__main__":
    junit_main.main()

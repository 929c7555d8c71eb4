"""tests/docs/checks.py: reading --help in its three styles, and the exact problems reported
for made-up flags, programs and paths."""

import os
import shutil
import tempfile
import unittest

import checks
import junit_main
from checks import Help
from markdown_refs import FlagRef, PathRef

ARGPARSE = """usage: launch [-h] [--servers SERVERS]

Starts a job. --not_an_option in the description.

options:
  -h, --help            show this help message and exit
  --servers SERVERS     number of servers
                        --wrapped_text is not an option either
  --dry_run             print, run nothing
"""
GFLAGS = """worker: the R2SP worker.

  Flags from /build/gflags/src/gflags.cc:
    -flagfile (load flags from file) type: string default: ""

  Flags from ./src/logging.cc:
    -v (verbosity) type: int32 default: 0

  Flags from worker/main.cc:
    -epochs (passes over the shard) type: int32 default: 1
    -overlap_pulls (pull while computing) type: bool default: true
"""
HEADER = """Runs the fuzz targets.
  tools/fuzz all SECONDS [--keep] [--jobs=N]
"""


class ParseHelpTest(unittest.TestCase):
    def test_argparse_takes_only_option_lines(self):
        self.assertEqual(checks.parse_help(ARGPARSE), Help(frozenset({"help", "servers", "dry_run"})))

    def test_gflags_and_negated_booleans(self):
        h = checks.parse_help(GFLAGS)
        self.assertEqual(h, Help(frozenset({"flagfile", "v", "epochs", "overlap_pulls"}),
                                 gflags=True, own=frozenset({"epochs", "overlap_pulls"})))
        self.assertEqual((h.has("nooverlap_pulls"), h.has("noepochs"), h.has("pulls")),
                         (True, True, False))
        self.assertFalse(Help(frozenset({"keep"})).has("nokeep"))

    def test_a_shell_header_names_its_flags_anywhere(self):
        self.assertEqual(checks.parse_help(HEADER), Help(frozenset({"keep", "jobs"})))


class ShellOptionsTest(unittest.TestCase):
    def test_case_arms_and_tests(self):
        fd, path = tempfile.mkstemp()
        self.addCleanup(os.remove, path)
        with os.fdopen(fd, "w") as f:
            f.write('#!/usr/bin/env bash\nif [ "${1:-}" = "--test" ]; then :; fi\n'
                    'case "$a" in\n  --keep) k=1 ;;\n  --jobs=*|--j=*) j="${a#*=}" ;;\n'
                    '  --help) ;;\nesac\nx=$(run --not_an_arm)\n')
        self.assertEqual(checks.shell_options(path), frozenset({"test", "keep", "jobs", "j"}))
        self.assertIsNone(checks.shell_options(__file__))


class DocumentedTest(unittest.TestCase):
    HELPS = {"tools/a": Help(frozenset({"help", "x", "y"}), own=frozenset({"help", "x", "y", "z"})),
             "tools/b": Help(frozenset({"x", "y"}))}

    def test_unlisted(self):
        self.assertEqual(checks.unlisted(self.HELPS),
                         ["tools/a takes --z, which its --help does not list"])

    def test_undocumented(self):
        refs = [FlagRef("tools/a", "x", "R.md", 1), FlagRef(None, "y", "R.md", 2)]
        self.assertEqual(checks.undocumented(self.HELPS, refs, {("tools/a", "z"): "why"}),
                         ["tools/a: --y", "tools/b: --x, --y"])
        self.assertEqual(checks.undocumented(self.HELPS, refs, {}, {"tools/b": "tools/a"}),
                         ["tools/a: --y, --z", "tools/b: --y"])


class FlagProblemsTest(unittest.TestCase):
    HELPS = {"tools/launch": Help(frozenset({"servers"})),
             "worker": Help(frozenset({"epochs"}), gflags=True)}

    def test_made_up_flags_and_programs(self):
        refs = [FlagRef("tools/launch", "servers", "R.md", 1),
                FlagRef("tools/launch", "made_up", "R.md", 2),
                FlagRef("tools/lunch", "servers", "R.md", 3),
                FlagRef(None, "epochs", "R.md", 4),
                FlagRef(None, "noepochs", "R.md", 5),
                FlagRef(None, "made_up", "R.md", 6),
                FlagRef("worker", "allowed", "R.md", 7)]
        self.assertEqual(checks.flag_problems(refs, self.HELPS, {("worker", "allowed"): "why"}), [
            "R.md:2: --made_up is given for tools/launch, whose --help does not list it",
            "R.md:3: --servers is given for tools/lunch, which is not a program here",
            "R.md:6: --made_up is no program's option (no --help lists it)"])


class PathProblemsTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        os.makedirs(os.path.join(self.root, "tests", "tools"))
        os.makedirs(os.path.join(self.root, "docs"))
        with open(os.path.join(self.root, "docs", "MODES.md"), "w"):
            pass
        with open(os.path.join(self.root, "tests", "tools", "BUILD"), "w") as f:
            f.write('cc_test(name = "netcluster_test")\n[py_test(name = "%s_test" % n) '
                    'for n in ["soak_run"]]\n')

    def test_missing_paths_and_targets(self):
        refs = [PathRef(p, "R.md", n) for n, p in enumerate([
            "docs/MODES.md", "docs/MADE_UP.md", "docs/made_up.md", "docs/*.md", "docs/*.txt",
            "tests/tools/netcluster_test", "tests/tools:soak_run_test", "tests/tools/x_test",
            "//tests/tools:netcluster_test", "//tests/tools:x", "//tests/", "//made/up",
            "tests/tools/TARGET/x", "tests/made/TARGET", "worker/gone", "//tests/tools:NAME",
            "//tests/made:NAME"], 1)]
        self.assertEqual(checks.path_problems(refs, self.root, {"worker/gone": "history"}), [
            "R.md:2: docs/MADE_UP.md is not in the repository",
            "R.md:3: docs/made_up.md is not in the repository",
            "R.md:5: docs/*.txt is not in the repository",
            "R.md:8: tests/tools/x_test is not in the repository",
            "R.md:10: //tests/tools:x is not in the repository",
            "R.md:12: //made/up is not in the repository",
            "R.md:14: tests/made/TARGET is not in the repository",
            "R.md:17: //tests/made:NAME is not in the repository"])


class RunHelpTest(unittest.TestCase):
    def script(self, body):
        fd, path = tempfile.mkstemp()
        self.addCleanup(os.remove, path)
        with os.fdopen(fd, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, 0o755)
        return path

    def test_output_and_failures(self):
        self.assertEqual(checks.run_help(self.script("# --help\necho '  --x'; exit 1\n")),
                         "  --x\n")
        with self.assertRaisesRegex(RuntimeError, r"--help failed \(status 3\):\nboom"):
            checks.run_help(self.script("# --help\necho boom; exit 3\n"))
        with self.assertRaisesRegex(RuntimeError, "timed out"):
            checks.run_help(self.script("# --help\nsleep 5\n"), timeout=0.5)

    def test_a_shell_tool_that_never_names_help_is_not_run(self):
        marker = tempfile.mktemp()
        with self.assertRaisesRegex(RuntimeError, "does not answer --help \\(not run\\)"):
            checks.run_help(self.script(f"touch {marker}\n"))
        self.assertFalse(os.path.exists(marker))


if __name__ == "__main__":
    junit_main.main()

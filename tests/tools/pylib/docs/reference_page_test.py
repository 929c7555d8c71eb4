"""tools/pylib/docs/reference_page.py: the page rendered from stand-in programs (a gflags
binary, an argparse tool, a shell tool; internal and non-executable files left out), exactly:
help text as indented blocks, options as tables whose first cell names the program; a program
whose --help prints nothing is refused by name."""

import os
import shutil
import stat
import tempfile
import textwrap
import unittest

import junit_main
from pylib.docs import reference_page

GFLAGS_HELP = "{name}: a stand-in\n\n  Flags from {name}/main.cc:\n    -port (where to listen) " \
              "type: int32 default: 9000\n"
ARGPARSE_TOOL = '''#!/usr/bin/env python3
"""Starts a job."""
import argparse
p = argparse.ArgumentParser(prog="alpha", description=__doc__, epilog="Exit 0 when done.")
p.add_argument("--servers", type=int, help="number of servers | at most 8 (default 2)")
p.parse_args()
'''
SHELL_TOOL = '''#!/usr/bin/env bash
# Fuzzes one target.
#   tools/bench/gamma TARGET [--keep]
if [ "${1:-}" = --help ]; then awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0; fi
case "${1:-}" in
  --jobs=*) ;;
esac
'''


def write(path, text, executable=True):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if executable:
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class ReferencePageTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.bin_dir = os.path.join(self.root, "bazel-bin")
        self.addCleanup(shutil.rmtree, self.root)
        for name in reference_page.BINARIES:
            write(os.path.join(self.bin_dir, name, name),
                  "#!/usr/bin/env python3\nimport sys\nprint(%r)\nsys.exit(1)\n"
                  % GFLAGS_HELP.format(name=name))  # gflags' --help exits 1
        for name in reference_page.BENCH_BINARIES:
            write(os.path.join(self.bin_dir, "tools", "bench", name),
                  "#!/usr/bin/env python3\nprint('usage: %s')\n" % name)
        write(os.path.join(self.root, "tools", "alpha"), ARGPARSE_TOOL)
        write(os.path.join(self.root, "tools", "bench", "gamma"), SHELL_TOOL)
        write(os.path.join(self.root, "tools", "deploy", "run_role"), SHELL_TOOL)  # internal
        write(os.path.join(self.root, "tools", "BUILD"), "# not a program", executable=False)

    def test_programs_in_the_pages_order_internal_and_plain_files_left_out(self):
        names = [(group, name) for group, name, _ in
                 reference_page.programs(self.root, self.bin_dir)]
        self.assertEqual(names, [("Binaries", "scheduler"), ("Binaries", "server"),
                                 ("Binaries", "worker"), ("Tools", "tools/alpha"),
                                 ("Benchmarks", "tools/bench/gamma")] +
                         [("Benchmarks", "tools/bench/" + n) for n in reference_page.BENCH_BINARIES])

    def test_each_style_as_its_section(self):
        page = reference_page.render(self.root, self.bin_dir)
        self.assertTrue(page.startswith(reference_page.HEADER))
        self.assertIn("- Binaries: [`scheduler`](#scheduler), [`server`](#server), "
                      "[`worker`](#worker)\n- Tools: [`tools/alpha`](#toolsalpha)\n", page)
        self.assertIn(textwrap.dedent("""\
            ### `server`

                server: a stand-in

            Flags from `server/main.cc`:

            | binary | flag | type | default | meaning |
            |---|---|---|---|---|
            | `server` | `--port` | int32 | 9000 | where to listen |
            """), page)
        self.assertIn(textwrap.dedent("""\
            ### `tools/alpha`

                Starts a job.

            Options:

            | tool | option | meaning |
            |---|---|---|
            | `tools/alpha` | `--servers SERVERS` | number of servers \\| at most 8 (default 2) |

                Exit 0 when done.
            """), page)
        self.assertIn(textwrap.dedent("""\
            ### `tools/bench/gamma`

                Fuzzes one target.
                  tools/bench/gamma TARGET [--keep]

            | tool | options |
            |---|---|
            | `tools/bench/gamma` | `--jobs`, `--keep` |
            """), page)

    def test_a_program_whose_help_prints_nothing_is_refused_by_name(self):
        silent = os.path.join(self.root, "tools", "alpha")
        write(silent, "#!/bin/sh\nexit 3\n")
        with self.assertRaisesRegex(RuntimeError, "^%s --help printed nothing \\(status 3\\)$"
                                    % silent):
            reference_page.render(self.root, self.bin_dir)


if __name__ == "__main__":
    junit_main.main()

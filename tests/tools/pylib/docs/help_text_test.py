"""tools/pylib/docs/help_text.py: the three --help styles read into text and options, exactly;
a gflags entry it cannot read is refused with the entry named."""

import unittest

import junit_main
from pylib.docs import help_text
from pylib.docs.help_text import Option

GFLAGS = """server: R2SP parameter server

  Flags from /build/gflags/src/gflags.cc:
    -flagfile (load flags from file) type: string default: ""

  Flags from ./src/logging.cc:
    -v (verbosity) type: int32 default: 0

  Flags from server/main.cc:
    -lr (learning rate (the base one)) type: double default: 0.01
    -lr_gamma (learning-rate decay factor at each milestone) type: double
      default: 0.10000000000000001
    -resume (restore the shard from the newest checkpoint that verifies (older ones
      are tried when a newer one is damaged)) type: bool default: false
"""
ARGPARSE = """usage: launch [-h] [--servers SERVERS]
              [--sync {bsp,asp}]

Starts a whole job.
  tools/launch --servers=2

positional arguments:
  DIR                   where the keys go

options:
  -h, --help            show this help message and exit
  --servers SERVERS     number of servers (default 2)
  --sync {bsp,asp}      consistency mode
  --max_restarts N|worker:N,server:M
                        replace dead workers,
                        at most N in all
  -q, --quiet           do not echo progress

The exit status is 0 if and only if the job completed.
"""
SHELL = """Runs the fuzz targets.
  tools/fuzz all SECONDS [--keep] [--jobs=N]
"""


class GflagsTest(unittest.TestCase):
    def test_only_our_sources_flags_with_type_default_and_meaning(self):
        helped = help_text.read_help(GFLAGS)
        self.assertEqual(helped.style, "gflags")
        self.assertEqual(helped.intro, "server: R2SP parameter server")
        self.assertEqual(helped.sections, [("server/main.cc", [
            Option("--lr", "double", "0.01", "learning rate (the base one)"),
            Option("--lr_gamma", "double", "0.1",
                   "learning-rate decay factor at each milestone"),
            Option("--resume", "bool", "false", "restore the shard from the newest checkpoint "
                   "that verifies (older ones are tried when a newer one is damaged)")])])

    def test_an_entry_it_cannot_read_is_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, r"^unreadable gflags entry in worker/main\.cc: "
                                                r"    -epochs passes over the shard$"):
            help_text.read_gflags("  Flags from worker/main.cc:\n    -epochs passes over the "
                                  "shard\n")


class ArgparseTest(unittest.TestCase):
    def test_description_sections_and_epilog(self):
        helped = help_text.read_help(ARGPARSE)
        self.assertEqual(helped.style, "argparse")
        self.assertEqual(helped.intro, "Starts a whole job.\n  tools/launch --servers=2")
        self.assertEqual(helped.sections, [
            ("positional arguments", [Option("DIR", "", "", "where the keys go")]),
            ("options", [
                Option("--servers", "SERVERS", "", "number of servers (default 2)"),
                Option("--sync", "{bsp,asp}", "", "consistency mode"),
                Option("--max_restarts", "N|worker:N,server:M", "",
                       "replace dead workers, at most N in all"),
                Option("--quiet", "", "", "do not echo progress")])])
        self.assertEqual(helped.outro, "The exit status is 0 if and only if the job completed.")

    def test_python_before_3_10_names_the_section_optional_arguments(self):
        helped = help_text.read_help("usage: x [-h] [--n N]\n\noptional arguments:\n"
                                     "  -h, --help  show this help message and exit\n"
                                     "  --n N       how many\n")
        self.assertEqual(helped.sections,
                         [("optional arguments", [Option("--n", "N", "", "how many")])])

    def test_a_description_alone(self):
        helped = help_text.read_help("usage: x\n\nDoes one thing.\n")
        self.assertEqual((helped.intro, helped.sections, helped.outro), ("Does one thing.", [], ""))


class ShellTest(unittest.TestCase):
    def test_the_header_whole_and_the_options_of_text_and_source(self):
        helped = help_text.read_help(SHELL, own_flags={"keep", "jobs", "list", "help"})
        self.assertEqual(helped.style, "shell")
        self.assertEqual(helped.intro, SHELL.strip())
        self.assertEqual(helped.sections, [("options", [
            Option("--jobs", "", "", ""), Option("--keep", "", "", ""),
            Option("--list", "", "", "")])])

    def test_a_header_without_options(self):
        helped = help_text.read_help("Builds and runs every test.\n", own_flags=set())
        self.assertEqual(helped.sections, [])


if __name__ == "__main__":
    junit_main.main()

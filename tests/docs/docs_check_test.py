"""The docs check: every --flag README.md and docs/*.md give for one of our programs is in that
program's --help (an unattributed one in some program's); every option a program takes is in its
--help (a shell script's, from its source) and, but for the internal programs (INTERNAL), given
for it somewhere in README.md or docs/ (its table row, or a command of it); every repository
path they name exists; README's Documentation list names every docs/*.md; docs/REFERENCE.md is
what tools/reference writes now; the long docs keep to their line budgets, every relative link
leads to a file and heading that exist, and no text in the repository outside tests/ speaks of
how the work was organised (doc_rules.py). How a flag is
attributed: markdown_refs.py; how --help is read and paths are matched: checks.py; the
exceptions: docs_allowlist.py. Each failure names the document and line.

Under Bazel the scheduler, server, worker and C++ benchmark binaries come from the runfiles
(data deps); the tools run from the source tree (the runfiles' README.md links to it), whose
paths are checked too; the test is tagged external, so it runs every time, not from a cache
that would miss a tool's or a file's change. By hand, once those binaries are built:
  PYTHONPATH=tools:tests/tools/pylib:tests/docs python3 tests/docs/docs_check_test.py [--bin_dir=DIR]
"""

import glob
import os
import subprocess
import sys
import unittest

import docs_allowlist
import checks
import doc_rules
import junit_main
import markdown_refs
from pylib.docs import reference_page
from command_flags import BENCH_BINARIES, BINARIES, EXAMPLES

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN_DIR = ""  # --bin_dir when run by hand
# What a remote host or a benchmark runs, not users: their options need no documentation.
INTERNAL = ("tools/deploy/", "tools/bench/torch_train.py", "tools/bench/chain_proxy_worker.py",
            EXAMPLES)


def runfiles_root():
    """The workspace's runfiles directory under Bazel, or None."""
    base = os.environ.get("TEST_SRCDIR")
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "r2sp")) if base else None


def documents(root):
    """{path relative to root: text} of README.md and docs/*.md."""
    docs = {}
    for path in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs",
                                                                                "*.md"))):
        with open(path) as f:
            docs[os.path.relpath(path, root)] = f.read()
    return docs


BUILD_OUTPUTS = ("bazel-", ".git", "dist", "runs", "results")  # what the walk passes over


def tracked_paths(root):
    """The files the repository tracks (git ls-files), or, without git, every file outside
    build outputs."""
    try:
        return subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                              check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(BUILD_OUTPUTS)]
            paths += [os.path.relpath(os.path.join(folder, f), root) for f in files]
        return paths


def repository_texts(root):
    """{path relative to root: text} of every text file of the repository, tests/ left out."""
    texts = {}
    for path in tracked_paths(root):
        if not path or path.startswith(doc_rules.WORK_TALK_EXEMPT):
            continue
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                texts[path] = f.read()
        except (OSError, UnicodeDecodeError):  # binary files (plots), removed files
            continue
    return texts


def programs(root, bin_dir):
    """{program: executable} of every program whose flags the docs may give."""
    found = {}
    for folder in ("tools", "tools/bench", "tools/deploy"):
        for path in sorted(glob.glob(os.path.join(root, folder, "*"))):
            if os.path.isfile(path) and os.access(path, os.X_OK):
                found[os.path.relpath(path, root)] = path
    for name in BINARIES:
        found[name] = os.path.join(bin_dir, name, name)
    for name in BENCH_BINARIES:
        found["tools/bench/" + name] = os.path.join(bin_dir, "tools", "bench", name)
    return found


def read_helps(root, bin_dir):
    """({program: Help}, [errors]) of every program (a shell script's own options from its
    source), and of the PyTorch examples (from theirs)."""
    helps, errors = {}, []
    for program, path in programs(root, bin_dir).items():
        try:
            helps[program] = checks.parse_help(checks.run_help(path))
        except RuntimeError as e:
            errors.append(str(e))
            continue
        own = checks.shell_options(path)
        if own is not None:
            helps[program].own = own
    helps[EXAMPLES] = checks.source_help(
        glob.glob(os.path.join(root, EXAMPLES, "**", "*.py"), recursive=True))
    return helps, errors


def report(errors, what):
    return (f"{len(errors)} problems; fix each document (or the program's --help), or, where the "
            f"document is right (another program's {what}, history), add it to "
            f"tests/docs/docs_allowlist.py with the reason:\n" + "\n".join(errors))


class DocsCheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        runfiles = runfiles_root()
        cls.root = (os.path.dirname(os.path.realpath(os.path.join(runfiles, "README.md")))
                    if runfiles else ROOT)
        cls.bin_dir = runfiles or BIN_DIR or os.path.join(ROOT, "bazel-bin")
        cls.docs = documents(cls.root)
        cls.refs = [r for name, text in cls.docs.items()
                    for r in markdown_refs.flag_refs(text, name)]
        cls.helps, cls.help_errors = read_helps(cls.root, cls.bin_dir)

    def test_every_flag_is_in_its_programs_help(self):
        errors = self.help_errors + checks.flag_problems(self.refs, self.helps,
                                                         docs_allowlist.FLAGS)
        if errors:
            self.fail(report(errors, "flag"))

    def test_every_option_is_in_its_programs_help(self):
        errors = self.help_errors + checks.unlisted(self.helps)
        self.assertEqual(errors, [], "\n" + "\n".join(errors))

    def test_every_option_is_documented(self):
        documented = {p: h for p, h in self.helps.items() if not p.startswith(INTERNAL)}
        errors = checks.undocumented(documented, self.refs, docs_allowlist.UNDOCUMENTED,
                                     docs_allowlist.DOCUMENTED_AS)
        self.assertEqual(errors, [], "\nthese options are given for their program nowhere in "
                         "README.md or docs/ (its table row, or a command of it in the doc it "
                         "belongs to), or belong in tests/docs/docs_allowlist.py with the "
                         "reason:\n" + "\n".join(errors))

    def test_every_path_is_in_the_repository(self):
        refs = [r for name, text in self.docs.items() for r in markdown_refs.path_refs(text, name)]
        errors = checks.path_problems(refs, self.root, docs_allowlist.PATHS)
        if errors:
            self.fail(report(errors, "path"))

    def test_reference_is_what_tools_reference_writes(self):
        page = reference_page.render(self.root, self.bin_dir)
        self.assertEqual(self.docs.get("docs/REFERENCE.md"), page,
                         "docs/REFERENCE.md is stale: run tools/reference (after building the "
                         "binaries) and commit the page")

    def test_long_docs_keep_to_their_line_budgets(self):
        self.assertEqual(doc_rules.over_budget(self.docs), [])

    def test_every_relative_link_leads_to_a_file_and_heading(self):
        self.assertEqual(doc_rules.broken_links(self.docs, self.root), [])

    def test_no_text_speaks_of_how_the_work_was_organised(self):
        problems = [p for path, text in sorted(repository_texts(self.root).items())
                    for p in doc_rules.work_talk(path, text)]
        self.assertEqual(problems, [], "\nsay what the project does instead, or add a "
                         "technical use to doc_rules.WORK_TALK_ALLOWED with its reason:\n" +
                         "\n".join(problems))

    def test_readme_lists_every_document(self):
        readme = self.docs["README.md"]
        listed = readme[readme.index("## Documentation"):]
        missing = [name for name in self.docs if name.startswith("docs/")
                   and f"\n- {name} " not in listed]
        self.assertEqual(missing, [], "add each to README.md's Documentation list")


if __name__ == "__main__":
    for arg in list(sys.argv[1:]):
        if arg.startswith("--bin_dir="):
            BIN_DIR = os.path.abspath(arg.split("=", 1)[1])
            sys.argv.remove(arg)
    junit_main.main()

"""The docs check's checks: the flags README.md and docs/*.md give (markdown_refs) against each
program's --help, and the repository paths they name against the repository.

A program's flags are read from its --help: argparse's option lines ("  --name ..."), gflags'
("    -name (...) type: ..."; a boolean's --noname counts too), or, for the shell tools, whose
--help is their header comment, every --name the header names. A flag attributed to a program
must be among that program's; an unattributed one among any program's. A path must exist (a
glob must match; an UPPER_CASE placeholder segment ends what is checked), or be a Bazel target:
a folder whose BUILD declares the last segment (tests/tools/netcluster_test) or a label
//pkg:name (is_bazel_target). The allowlists (docs_allowlist.py) take exceptions, each with its reason."""

import dataclasses
import glob
import os
import re
import subprocess

from pylib.docs import reference_page

ARGPARSE_OPTION = re.compile(r"^  (?:-\w, )?--([\w-]+)", re.M)
GFLAGS_OPTION = re.compile(r"^\s+-([\w]+) \(", re.M)
ANY_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclasses.dataclass
class Help:
    """What a program's --help says: its flags, whether it is a gflags binary (whose booleans
    also take --noNAME), and its own options: all its flags but, for a gflags binary, those
    gflags and glog declare (--v, --logtostderr, --flagfile, ...), which the docs need not
    repeat."""
    flags: frozenset
    gflags: bool = False
    own: frozenset = None

    def __post_init__(self):
        if self.own is None:
            self.own = self.flags

    def has(self, flag):
        return flag in self.flags or (self.gflags and flag.startswith("no")
                                      and flag[2:] in self.flags)


def parse_help(text):
    """A Help from --help's output, by its style (gflags, argparse, or a shell header)."""
    gflags = GFLAGS_OPTION.findall(text)
    if gflags:
        own = set()
        for section in re.split(r"^  Flags from ", text, flags=re.M)[1:]:
            if not section.startswith(("/", "./src/")):  # ours, not the libraries'
                own.update(GFLAGS_OPTION.findall(section))
        return Help(frozenset(gflags), gflags=True, own=frozenset(own))
    if text.startswith("usage:") and ARGPARSE_OPTION.search(text):
        return Help(frozenset(ARGPARSE_OPTION.findall(text)))
    return Help(frozenset(ANY_FLAG.findall(text)))


def shell_options(path):
    """The options a shell script takes, from its source (reference_page.shell_flags, which
    docs/REFERENCE.md is written with), less --help; None if it is not a shell script."""
    flags = reference_page.shell_flags(path)
    return None if flags is None else frozenset(flags - {"help"})


def run_help(path, timeout=60):
    """`path --help`'s output (stdout and stderr); RuntimeError if it fails, hangs or cannot
    start, or, not run, if it is a shell script whose source never names --help (such a script
    would take --help for an argument and do its work: build, install, run the tests)."""
    if shell_options(path) is not None:
        with open(path, errors="replace") as f:
            if "--help" not in f.read():
                raise RuntimeError(f"{path} does not answer --help (not run): a shell tool must "
                                   f"print its header and exit on --help (see tools/fuzz)")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=timeout,
                           env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{path} --help: {e}")
    text = r.stdout + r.stderr
    if r.returncode != 0 and not parse_help(text).flags:  # gflags' --help exits 1
        raise RuntimeError(f"{path} --help failed (status {r.returncode}):\n{text[-800:]}")
    return text


def source_help(paths):
    """A Help of the options the Python files `paths` declare (add_argument("--name"): the
    PyTorch examples, whose --help would need torch)."""
    flags = set()
    for path in paths:
        with open(path) as f:
            flags.update(re.findall(r'add_argument\(\s*"--([\w-]+)"', f.read()))
    return Help(frozenset(flags))


def flag_problems(refs, helps, allowed):
    """'source:line: ...' for every FlagRef not in its program's Help (`helps`: program ->
    Help), or, unattributed, in none; `allowed`: {(program or None, flag): reason}."""
    problems = []
    for ref in refs:
        if (ref.program, ref.flag) in allowed:
            continue
        where = f"{ref.source}:{ref.line}"
        if ref.program is None:
            if not any(h.has(ref.flag) for h in helps.values()):
                problems.append(f"{where}: --{ref.flag} is no program's option (no --help "
                                f"lists it)")
        elif ref.program not in helps:
            problems.append(f"{where}: --{ref.flag} is given for {ref.program}, which is not a "
                            f"program here")
        elif not helps[ref.program].has(ref.flag):
            problems.append(f"{where}: --{ref.flag} is given for {ref.program}, whose --help "
                            f"does not list it")
    return problems


def unlisted(helps):
    """'PROGRAM takes --flag, ... which its --help does not list' for every program whose own
    options (for a shell script, those of its source) are not all in its --help."""
    return [f"{program} takes " + ", ".join("--" + f for f in sorted(h.own - h.flags))
            + ", which its --help does not list"
            for program, h in sorted(helps.items()) if h.own - h.flags]


def undocumented(helps, refs, allowed, documented_as=None):
    """'PROGRAM: --flag, ...' for every program whose own options (Help.own, less --help) the
    FlagRefs `refs` never give for it (nor for documented_as[program]); `allowed`: {(program,
    flag): reason}."""
    given = {(r.program, r.flag) for r in refs}
    documented_as = documented_as or {}
    problems = []
    for program, h in sorted(helps.items()):
        names = [n for n in (program, documented_as.get(program)) if n is not None]
        missing = sorted(f for f in h.own - {"help"} if (program, f) not in allowed
                         and not any((name, f) in given for name in names))
        if missing:
            problems.append(f"{program}: " + ", ".join("--" + f for f in missing))
    return problems


def is_bazel_target(root, package, name):
    """Whether ROOT/package/BUILD declares a target `name`: as name = "NAME", or, for a test
    made in a list comprehension (name = "%s_test" % name), NAME less _test as a string."""
    try:
        with open(os.path.join(root, package, "BUILD")) as f:
            text = f.read()
    except OSError:
        return False
    stem = name[:-len("_test")] if name.endswith("_test") else None
    return (f'name = "{name}"' in text) or (stem is not None and f'"{stem}"' in text)


def path_exists(root, path):
    """Whether repository path `path` (or Bazel label) names something in ROOT."""
    if path.startswith("//"):
        package, _, name = path[2:].partition(":")
        package = package.rstrip("/.")
        if not os.path.isdir(os.path.join(root, package)):
            return False
        return not name or bool(PLACEHOLDER.match(name)) or is_bazel_target(root, package, name)
    parts = path.split("/")
    for i, part in enumerate(parts):
        if PLACEHOLDER.match(part) and not os.path.exists(os.path.join(root, *parts[:i + 1])):
            return os.path.isdir(os.path.join(root, *parts[:i]))
    if "*" in path:
        return bool(glob.glob(os.path.join(root, path)))
    if os.path.exists(os.path.join(root, path)):
        return True
    package, _, name = path.rpartition("/")
    if ":" in name:  # tests/tools:soak_run_test
        package, name = path.split(":", 1)
    return is_bazel_target(root, package, name)


def path_problems(refs, root, allowed):
    """'source:line: ...' for every PathRef naming nothing in ROOT; `allowed`: {path: reason}."""
    return [f"{ref.source}:{ref.line}: {ref.path} is not in the repository"
            for ref in refs if ref.path not in allowed and not path_exists(root, ref.path)]

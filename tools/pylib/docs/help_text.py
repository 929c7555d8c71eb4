"""A program's --help read into its parts, for docs/REFERENCE.md (tools/reference): the text
around its options, and each option's name, value, type, default and meaning. Three styles:
gflags (the C++ binaries: only the flags their own source files define, not glog's or gflags'),
argparse (the Python tools) and a shell tool's header comment (kept whole: its options are named
in its text)."""

import dataclasses
import re

GFLAGS_SECTION = re.compile(r"^  Flags from (\S+):$", re.M)
GFLAGS_ENTRY = re.compile(r"^    -(\w+) \((.*)\) type: (\w+)(?: default: (.*))?$", re.S)
ARGPARSE_HEADING = re.compile(r"^(options|optional arguments|positional arguments|[\w ]+ "
                              r"(?:options|arguments)):$")
ARGPARSE_ENTRY = re.compile(r"^  (-\w, )?((?:--?)?[\w.-]+)(?: ([^ ].*?))?(?:  +(.*))?$")
SHELL_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")


@dataclasses.dataclass(frozen=True)
class Option:
    """One option: `name` with its leading dashes (or a positional's name), `value` its
    metavar (argparse) or type (gflags), `default` (gflags; '' when none) and `meaning`."""
    name: str
    value: str
    default: str
    meaning: str


@dataclasses.dataclass
class ProgramHelp:
    """What one program's --help says. `intro` and `outro`: the text before and after its
    options (verbatim lines); `sections`: [(source or heading, [Option])]; `style`: 'gflags',
    'argparse' or 'shell'."""
    style: str
    intro: str
    sections: list
    outro: str = ""


def _join(lines):
    return " ".join(line.strip() for line in lines if line.strip())


def read_gflags(text, own=lambda source: not source.startswith(("/", "./src/"))):
    """A ProgramHelp of a gflags binary's --help: the usage line, then one section per source
    file of ours (`own`), its flags in the order printed."""
    parts = GFLAGS_SECTION.split(text)
    intro = parts[0].strip()
    sections = []
    for source, body in zip(parts[1::2], parts[2::2]):
        if not own(source):
            continue
        entries, current = [], []
        for line in body.split("\n"):
            if line.startswith("    -") and current:
                entries.append(current)
                current = []
            if line.strip():
                current.append(line)
        if current:
            entries.append(current)
        options = []
        for entry in entries:
            joined = entry[0] + "".join(" " + line.strip() for line in entry[1:])
            m = GFLAGS_ENTRY.match(joined)
            if not m:
                raise ValueError(f"unreadable gflags entry in {source}: {joined[:120]}")
            name, meaning, kind, default = m.groups()
            default = (default or "").strip()
            if kind == "double":  # gflags prints 0.1 as 0.10000000000000001
                default = repr(float(default))
            options.append(Option("--" + name, kind, default, meaning.strip()))
        sections.append((source, options))
    return ProgramHelp("gflags", intro, sections)


def _argparse_options(lines):
    """[Option] of one argparse section's lines (an entry's help may start on its own line and
    continue on deeper-indented ones)."""
    options = []
    for line in lines:
        m = ARGPARSE_ENTRY.match(line)
        if m and not line.startswith("   "):
            _, name, value, meaning = m.groups()
            options.append([name, (value or "").strip(), [meaning or ""]])
        elif options and line.strip():
            options[-1][2].append(line)
    return [Option(name, value, "", _join(meaning)) for name, value, meaning in options
            if name not in ("-h", "--help")]


def read_argparse(text):
    """A ProgramHelp of an argparse --help: the description (after the usage block) as intro,
    one section per heading ("options:", "positional arguments:", ...), the epilog as outro."""
    lines = text.rstrip("\n").split("\n")
    i = 0
    while i < len(lines) and lines[i].strip():  # the usage block
        i += 1
    body = lines[i:]
    headings = [n for n, line in enumerate(body) if ARGPARSE_HEADING.match(line)]
    if not headings:
        return ProgramHelp("argparse", "\n".join(body).strip(), [])
    intro = "\n".join(body[:headings[0]]).strip()
    sections, outro = [], ""
    for k, start in enumerate(headings):
        end = headings[k + 1] if k + 1 < len(headings) else len(body)
        section = body[start + 1:end]
        # The epilog follows the last section after a blank line, not indented.
        tail = next((n for n in range(len(section)) if section[n] and
                     not section[n].startswith(" ")), None)
        if tail is not None:
            outro = "\n".join(section[tail:]).strip()
            section = section[:tail]
        options = _argparse_options(section)
        if options:
            sections.append((body[start].rstrip(":"), options))
    return ProgramHelp("argparse", intro, sections, outro)


def read_shell(text, own_flags):
    """A ProgramHelp of a shell tool, whose --help is its header comment: kept whole as intro;
    one section of the options its source takes (`own_flags`, from its case arms and tests),
    each meaning left to the text."""
    named = set(SHELL_FLAG.findall(text))
    options = [Option("--" + f, "", "", "") for f in sorted(set(own_flags) | named)
               if f != "help"]
    return ProgramHelp("shell", text.strip(), [("options", options)] if options else [])


def read_help(text, own_flags=None):
    """A ProgramHelp of any of the three styles; `own_flags`: a shell tool's options from its
    source (None for other programs)."""
    if own_flags is not None:
        return read_shell(text, own_flags)
    if GFLAGS_SECTION.search(text):
        return read_gflags(text)
    if text.startswith("usage:"):
        return read_argparse(text)
    return read_shell(text, ())

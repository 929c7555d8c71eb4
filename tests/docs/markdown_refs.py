"""The command-line flags and repository paths a Markdown document names, and the program each
flag is given for. The docs check (docs_check_test.py) holds them against the programs' --help
and the repository.

How a flag is attributed to a program (command_flags.py reads the commands):
  1. Commands: a fenced code block's lines (a trailing backslash joins lines; `&&`, `;`, `|`
     split commands; `#` starts a comment) and every inline code span are read as commands.
     A command whose first word (after VAR=value and sudo) is one of our programs gives that
     program every flag after it: tools/X and tools/bench/X scripts (also as ./tools/X, or
     after python3), the scheduler, server and worker binaries (`worker`, `bazel-bin/worker/
     worker`, `DIR/bin/worker`), the C++ benchmarks (`train_benchmark`, `BIN/pushpull_
     benchmark`, `bazel run //tools/bench:NAME -- FLAGS`). A command of any other program
     (bazel, kubectl, a PyTorch script, ...) keeps its flags: they are not checked.
  2. Flags inside the value of a flags option go to the program it is for, wherever it stands:
     --scheduler_flags, --server_flags, --worker_flags, --worker_flags_for=RANK:, --variant=
     NAME= to the worker, --scheduler_variant=NAME= and --server_variant=NAME= to the scheduler
     and the servers, --net to tools/netcluster; the values of --worker_cmd, --worker_cmd_
     for, --ddp_cmd, --script_flags and --command are other programs' command lines: skipped.
  3. Tables whose header's first cell is "binary" or "tool" (README's flag table): the first
     cell names the program ("all three": scheduler, server and worker; empty: the row
     above's), and every flag of the second cell is that program's.
  4. A code span that starts with a flag, and prose, give unattributed flags (program None):
     the check wants each in some program's --help (or in its allowlist).

A repository path is a word (in a code span, a fenced block or prose) that starts with one of
the repository's top-level folders (common/, docs/, examples/, ...) followed by a name, or a
Bazel label //pkg:name or //pkg/...; the check wants it in the repository (checks.py)."""

import dataclasses
import re

from command_flags import command_flags

TOP_DIRS = ("common", "docs", "examples", "models", "proto", "scheduler", "server", "tests",
            "third_party", "tools", "worker")
PROSE_FLAG = re.compile(r"(?<![\w/-])--([A-Za-z][\w-]*)")
PATH = re.compile(r"(?<![\w/.$~<:-])(?:\./)?((?:%s)/[\w./*:-]*[\w*]|//(?:%s)\b[\w/.]*(?::[\w.-]+)?)"
                  % ("|".join(TOP_DIRS), "|".join(TOP_DIRS)))
SPAN = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^\s*(```|~~~)")
PROGRAM_TABLE_HEADERS = ("binary", "tool")


@dataclasses.dataclass(frozen=True)
class FlagRef:
    """`--flag` named for `program` (None: unattributed) at `source`:`line`."""
    program: object
    flag: str
    source: str
    line: int


@dataclasses.dataclass(frozen=True)
class PathRef:
    """A repository path (or Bazel label) named at `source`:`line`."""
    path: str
    source: str
    line: int


def fenced_commands(lines):
    """(line number, command) of every fenced block's lines, backslash continuations joined;
    and the lines with those blocks blanked (so the rest reads them as empty)."""
    commands, rest, fenced, pending, start = [], [], False, "", 0
    for n, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced, pending = not fenced, ""
            rest.append("")
            continue
        if not fenced:
            rest.append(line)
            continue
        rest.append("")
        if not pending:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        commands.append((start, pending + line))
        pending = ""
    return commands, rest


def table_cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_programs(cell, previous):
    """The programs a flag table's first cell names: its code spans (`tools/launch`), else its
    words ("scheduler"; "all three": scheduler, server and worker); empty: `previous`."""
    if not cell:
        return previous
    if cell == "all three":
        return ["scheduler", "server", "worker"]
    names = SPAN.findall(cell) or [cell]
    return [name[2:] if name.startswith("./") else name for name in names]


def program_tables(lines):
    """(line number, program, flag) of the flags in program tables' second cells (rule 3), and
    the lines with those cells blanked."""
    found, rest, in_table, programs = [], list(lines), False, []
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("|"):
            in_table = False
            continue
        cells = table_cells(line)
        if not in_table:  # a header row
            in_table = True
            is_program_table = cells[0].lower() in PROGRAM_TABLE_HEADERS
            programs = []
            continue
        if not is_program_table or set(cells[0]) <= set("-: ") and cells[0]:
            continue
        if len(cells) < 2:
            continue
        programs = table_programs(cells[0], programs)
        for flag in PROSE_FLAG.findall(cells[1].replace("`", " ")):
            found += [(i + 1, program, flag) for program in programs]
        rest[i] = "| " + cells[0] + " | |" + "|".join(cells[2:]) + "|"
    return found, rest


def span_commands(text):
    """(line number, content) of every code span, and the text with spans replaced by spaces."""
    spans = [(text.count("\n", 0, m.start()) + 1, m.group(1).replace("\n", " "))
             for m in SPAN.finditer(text)]
    return spans, SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def flag_refs(text, source):
    """Every flag `text` (Markdown) names, attributed as the module's docstring says."""
    lines = text.split("\n")
    fenced, lines = fenced_commands(lines)
    tabled, lines = program_tables(lines)
    spans, prose = span_commands("\n".join(lines))
    refs = [FlagRef(program, flag, source, n) for n, program, flag in tabled]
    for n, command in fenced + spans:
        refs += [FlagRef(program, flag, source, n) for program, flag in command_flags(command)]
    for n, line in enumerate(prose.split("\n"), 1):
        refs += [FlagRef(None, flag, source, n) for flag in PROSE_FLAG.findall(line)]
    return refs


def path_refs(text, source):
    """Every repository path or Bazel label `text` names (a trailing '.' or ':' dropped)."""
    refs = []
    for n, line in enumerate(text.split("\n"), 1):
        for m in PATH.finditer(line):
            refs.append(PathRef(m.group(1).rstrip(".:"), source, n))
    return refs

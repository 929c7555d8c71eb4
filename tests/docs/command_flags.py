"""The flags a shell command line gives, and the program each is for (rules 1 and 2 of
markdown_refs.py): our programs' commands give them their flags, a foreign command's flags are
left out, and a flags option's value (--server_flags="--lr=0.1") gives its flags to the
program it is for."""

import re
import shlex

from pylib.docs.reference_page import BENCH_BINARIES, BINARIES  # noqa: F401 (re-exported)

EXAMPLES = "examples/pytorch"  # the PyTorch example scripts, which share their options
PYTHONS = ("python3", "/usr/bin/python3", "python")
# Options whose value is flags of another program of ours (None: of a foreign command line).
NESTED = {"scheduler_flags": "scheduler", "server_flags": "server", "worker_flags": "worker",
          "worker_flags_for": "worker", "variant": "worker", "scheduler_variant": "scheduler",
          "server_variant": "server", "net": "tools/netcluster",
          "worker_cmd": None, "worker_cmd_for": None, "ddp_cmd": None, "script_flags": None,
          "command": None}
FLAG = re.compile(r"^--([A-Za-z][\w-]*)(=.*)?$", re.S)


def program_of(word):
    """The program of ours `word` runs (tools/..., a binary's name, tools/bench/NAME for a C++
    benchmark, EXAMPLES for a script of examples/pytorch/), or None."""
    word = word[2:] if word.startswith("./") else word
    if re.fullmatch(r"tools/[\w./-]+", word):
        return word
    if re.fullmatch(r"examples/pytorch/[\w./-]+\.py", word):
        return EXAMPLES
    base = word.rsplit("/", 1)[-1]
    if base == "r2sp-run":  # the wheel's console script (venv/bin/r2sp-run) is tools/r2sp-run
        return "tools/r2sp-run"
    if base in BINARIES:
        return base
    if base in BENCH_BINARIES:
        return "tools/bench/" + base
    return None


def split_words(command):
    """Shell words of one command (brackets of optional parts dropped); falls back to splitting
    on spaces where the quoting is not a shell's."""
    command = command.replace("\\|", "|")
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    return [w.strip("[]") for w in words if w.strip("[]")]


def split_commands(text):
    """The commands of a line of shell: split at &&, ||, ; and | outside quotes."""
    parts, current, quote = [], "", None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in ";|&":
            parts.append(current)
            current = ""
            i += 2 if text[i:i + 2] in ("&&", "||") else 1
            continue
        current += c
        i += 1
    return [p for p in parts + [current] if p.strip()]


FOREIGN = "foreign"  # command_program: a program not of ours


def command_program(words):
    """(program, index of its first argument) of a command's words: program is one of ours,
    FOREIGN, or None when the command starts with a flag (a code span of flags) or is empty."""
    i = 0
    while i < len(words) and (re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[i]) or words[i] == "sudo"):
        i += 1
    if i == len(words) or words[i].startswith("-"):
        return None, i
    if words[i] in PYTHONS and i + 1 < len(words):
        i += 1
    if words[i] == "bazel" and "run" in words[i:]:
        labels = [w for w in words[i:] if w.startswith("//tools/bench:")]
        if labels and "--" in words:
            return "tools/bench/" + labels[0].split(":")[1], words.index("--") + 1
    return program_of(words[i]) or FOREIGN, i + 1


def nested_flags(name, value):
    """(program, words) of the flags in option --name's value, or None if it holds none of
    ours."""
    if name not in NESTED or NESTED[name] is None:
        return None
    if name == "worker_flags_for":
        value = value.partition(":")[2]
    elif name in ("variant", "scheduler_variant", "server_variant"):
        value = value.partition("=")[2]
    return NESTED[name], split_words(value)


def word_flags(program, words):
    """(program, flag) of every flag in `words`, a flags option's value going to its program."""
    found = []
    for word in words:
        m = FLAG.match(word)
        if not m:
            continue
        found.append((program, m.group(1)))
        if m.group(2):
            inner = nested_flags(m.group(1), m.group(2)[1:])
            if inner:
                found += word_flags(*inner)
    return found


def command_flags(command):
    """(program, flag) of every flag in one shell line (rules 1 and 2; program None: a flag
    before any command word); a foreign command's flags are left out."""
    found = []
    for part in split_commands(command):
        words = split_words(part)
        program, start = command_program(words)
        if program != FOREIGN:
            found += word_flags(program, words[start:])
    return found

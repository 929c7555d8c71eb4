"""docs/REFERENCE.md from the programs themselves: every option of the scheduler, server and
worker binaries, of the C++ benchmarks and of every tool, read from its --help (help_text.py)
and laid out as one section per program. tools/reference writes the page; the docs check
renders it again and fails when the file differs, so the page cannot go stale."""

import glob
import os
import re
import subprocess

from pylib.docs import help_text

BINARIES = ("scheduler", "server", "worker")
BENCH_BINARIES = ("codec_benchmark", "crypto_throughput", "pushpull_benchmark",
                  "server_apply_benchmark", "train_benchmark")
# What a remote host or a benchmark runs, not users: left out of the page.
INTERNAL = ("tools/deploy/", "tools/bench/torch_train.py", "tools/bench/chain_proxy_worker.py")
# A fixed width, so that argparse wraps its text the same on every terminal.
HELP_ENV = {"COLUMNS": "100", "PYTHONDONTWRITEBYTECODE": "1"}

HEADER = """# Reference

Every option of R2SP's programs, as each program's `--help` prints it: the scheduler, server and
worker binaries, the C++ benchmarks, and the tools. `tools/reference` writes this page from the
programs themselves, and the test suite fails when it differs from what they print, so it holds
for the code beside it. The binaries also take glog's and gflags' own flags (`--v`,
`--logtostderr`, `--flagfile`, ...), not repeated here. How to choose among the options:
[CHOOSING](CHOOSING.md); what the errors mean: [TROUBLESHOOTING](TROUBLESHOOTING.md).
"""


def programs(root, bin_dir):
    """[(group, name, path)] of every program on the page, in its order: binaries, tools, the
    benchmark scripts, the C++ benchmarks."""
    found = [("Binaries", name, os.path.join(bin_dir, name, name)) for name in BINARIES]
    for group, folder in (("Tools", "tools"), ("Benchmarks", "tools/bench")):
        for path in sorted(glob.glob(os.path.join(root, folder, "*"))):
            name = os.path.relpath(path, root)
            if (os.path.isfile(path) and os.access(path, os.X_OK)
                    and not name.startswith(INTERNAL)):
                found.append((group, name, path))
    found += [("Benchmarks", "tools/bench/" + name, os.path.join(bin_dir, "tools", "bench", name))
              for name in BENCH_BINARIES]
    return found


def shell_flags(path):
    """The options a shell script's source takes (the flags of its `case` arms, --name) or
    --name=*), and of tests like [ "$1" = --name ]), or None if `path` is not a shell script."""
    with open(path, "rb") as f:
        first = f.readline(200).decode(errors="replace")
    if not re.match(r"#!.*\b(ba)?sh\b", first):
        return None  # a binary, or a Python tool
    with open(path, errors="replace") as f:
        text = f.read()
    flags = set(re.findall(r'=\s*"?--([\w-]+)"?\s*\]', text))
    for arm in re.findall(r"^\s*((?:--[\w-]+(?:=\*)?\|?)+)\).*;;", text, re.M):
        flags.update(re.findall(r"--([\w-]+)", arm))
    return flags


def run_help(path):
    """`path --help`'s output; RuntimeError if it cannot run or prints nothing usable (gflags'
    --help exits 1, so the status alone says nothing)."""
    env = dict(os.environ, **HELP_ENV)
    try:
        r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60,
                           env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{path} --help: {e}") from e
    text = r.stdout + r.stderr
    if not text.strip():
        raise RuntimeError(f"{path} --help printed nothing (status {r.returncode})")
    return text


def cell(text):
    """Text for a Markdown table cell: pipes escaped, never empty."""
    return text.replace("|", "\\|") if text else " "


def verbatim(text):
    """`text` as an indented code block: shown as printed, and read by the docs check as prose
    (a fenced block's lines would read as commands, `server ...` giving flags to the server)."""
    return "\n".join(("    " + line).rstrip() for line in text.rstrip().split("\n")) + "\n"


def anchor(name):
    """GitHub's anchor of a heading `name` (in a code span)."""
    return "".join(c for c in name.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def section(name, helped, kind):
    """The Markdown of one program: its text, then its options as a table whose first cell
    names it (the docs check reads such tables)."""
    out = [f"### `{name}`\n"]
    if helped.intro:
        out.append(verbatim(helped.intro))
    for source, options in helped.sections:
        if helped.style == "shell":  # the text above says what each does
            flags = ", ".join(f"`{o.name}`" for o in options)
            out.append(f"| {kind} | options |\n|---|---|\n| `{name}` | {flags} |\n")
            continue
        label = f"Flags from `{source}`:" if helped.style == "gflags" else f"{source.capitalize()}:"
        out.append(label + "\n")
        if helped.style == "gflags":
            rows = [f"| {kind} | flag | type | default | meaning |", "|---|---|---|---|---|"]
            rows += [f"| `{name}` | `{o.name}` | {o.value} | {cell(o.default)} | "
                     f"{cell(o.meaning)} |" for o in options]
        else:
            rows = [f"| {kind} | option | meaning |", "|---|---|---|"]
            rows += [f"| `{name}` | `{cell((o.name + ' ' + o.value).strip())}` | "
                     f"{cell(o.meaning)} |" for o in options]
        out.append("\n".join(rows) + "\n")
    if helped.outro:
        out.append(verbatim(helped.outro))
    return "\n".join(part for part in out if part)


def render(root, bin_dir):
    """The whole page, from the programs under ROOT and the binaries under BIN_DIR."""
    sections, contents, group_seen = [], [], None
    for group, name, path in programs(root, bin_dir):
        helped = help_text.read_help(run_help(path), shell_flags(path))
        if group != group_seen:
            sections.append(f"## {group}\n")
            contents.append(f"- {group}:")
            group_seen = group
        kind = "binary" if group == "Binaries" else "tool"
        sections.append(section(name, helped, kind))
        contents[-1] += (" " if contents[-1].endswith(":") else ", ") + f"[`{name}`](#{anchor(name)})"
    return HEADER + "\n" + "\n".join(contents) + "\n\n" + "\n".join(sections)

"""Quoting for the shells the remote backends write commands for (ssh's remote shell, Slurm's
batch script, EC2's user-data): everything literal except the references the backend means the
shell to expand (its run directory, a node of the allocation), which stay live but are never
split into several words."""

import re
import shlex


def shell_word(arg, live=None, expand=None):
    """`arg` as one POSIX shell word. The matches of the regex `live` are left for the shell:
    each becomes expand(match) (by default the match double-quoted), the text between them is
    single-quoted where it needs quoting."""
    if live is None:
        return shlex.quote(arg)
    expand = expand or (lambda m: f'"{m.group(0)}"')
    pieces, last = [], 0
    for found in live.finditer(arg):
        if found.start() > last:
            pieces.append(shlex.quote(arg[last:found.start()]))
        pieces.append(expand(found))
        last = found.end()
    if last < len(arg) or not pieces:
        pieces.append(shlex.quote(arg[last:]))
    return "".join(pieces)


def variables(*names):
    """The regex of shell variable references $NAME (for shell_word's `live`)."""
    return re.compile("|".join(re.escape("$" + n) + r"(?![A-Za-z0-9_])" for n in names))

"""Where tables and keys are in a TOML file's text, for messages that name the line: tomllib
decodes a document but keeps no positions. Used by cluster_file.py."""

import re


class TomlLines:
    """Where tables and keys are in the raw text: the line of each table header ([job], the
    n-th [[host]]) and of each `key =` in it (bare or quoted keys), since tomllib keeps no
    positions. Strings (multi-line ones too) and comments are skipped, as are the lines of a
    value that spans several; so a key inside an inline table is found at that table's line."""

    def __init__(self, text):
        self.lines = {}  # (table, key or None) -> line; table: () top level, ("job",), ("host", n)
        table, arrays, depth, open_string = (), {}, 0, None
        for number, line in enumerate(text.splitlines(), 1):
            start = 0
            if open_string:
                end = _string_end(line, 0, open_string)
                if end < 0:
                    continue
                open_string, start = None, end
            elif depth == 0:
                header = re.match(r"\s*(\[\[?)([^\[\]]+)\]\]?\s*(#.*)?$", line)
                if header:
                    parts = [p.strip().strip("\"'") for p in header.group(2).split(".")]
                    if header.group(1) == "[[":
                        arrays[parts[0]] = arrays.get(parts[0], -1) + 1
                    base = (parts[0], arrays[parts[0]]) if parts[0] in arrays else (parts[0],)
                    table = base + tuple(parts[1:])  # [host.x]: a table in the last [[host]]
                    self.lines.setdefault(((), parts[0]), number)
                    self.lines.setdefault((base, parts[1] if len(parts) > 1 else None), number)
                    continue
                key = re.match(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*[.=]""", line)
                if key:
                    self.lines.setdefault((table, key.group(1).strip("\"'")), number)
                    start = key.end()
            code, open_string = _code(line, start)
            depth = max(0, depth + sum(code.count(c) for c in "[{") -
                        sum(code.count(c) for c in "]}"))

    def of(self, table, key=None):
        """The line of `key` in `table`, else of the table's header (or of the top-level key
        that holds it inline), else 1."""
        for place in ((table, key), (table, None), ((), table[0] if table else None)):
            if place in self.lines:
                return self.lines[place]
        return 1


def _code(line, start):
    """(line[start:] without its strings and comment, the quote of a multi-line string left
    open at its end or None)."""
    code, i = [], start
    while i < len(line) and line[i] != "#":
        if line[i] in "\"'":
            quote = line[i] * 3 if line.startswith(line[i] * 3, i) else line[i]
            i = _string_end(line, i + len(quote), quote)
            if i < 0:
                return "".join(code), quote if len(quote) == 3 else None
        else:
            code.append(line[i])
            i += 1
    return "".join(code), None


def _string_end(line, i, quote):
    """The index just past the `quote` that closes a string at line[i:], or -1."""
    while i < len(line):
        if line[i] == "\\" and quote[0] == '"':
            i += 2
        elif line.startswith(quote, i):
            return i + len(quote)
        else:
            i += 1
    return -1

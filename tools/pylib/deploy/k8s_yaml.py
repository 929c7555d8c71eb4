"""A minimal YAML writer for Kubernetes manifests (dicts, lists, strings, numbers, booleans,
None), so that the launcher needs no YAML library. Block style throughout; a string is written
plain only when no YAML reader could take it for anything else, and otherwise as a JSON string,
which is also a valid YAML double-quoted scalar."""

import json
import re

_PLAIN = re.compile(r"[A-Za-z_/$][A-Za-z0-9_./:$()-]*")
# Plain scalars that a YAML 1.1 or 1.2 reader would not take as strings.
_SPECIAL = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def scalar(value):
    """`value` (not a dict or list) as a YAML scalar."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot write {type(value).__name__} {value!r} as YAML")
    if _PLAIN.fullmatch(value) and value.lower() not in _SPECIAL and not value.endswith(":"):
        return value
    return json.dumps(value)


def _lines(value, indent):
    """The block lines of a dict or list at `indent` spaces."""
    pad = " " * indent
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{scalar(str(key))}:")
                # A list under a key sits at the key's indentation (the usual Kubernetes style).
                out += _lines(item, indent if isinstance(item, list) else indent + 2)
            else:
                out.append(f"{pad}{scalar(str(key))}: {_inline(item)}")
    else:
        for item in value:
            if isinstance(item, (dict, list)) and item:
                first, *rest = _lines(item, indent + 2)
                out.append(f"{pad}- {first[indent + 2:]}")
                out += rest
            else:
                out.append(f"{pad}- {_inline(item)}")
    return out


def _inline(value):
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return scalar(value)


def dump(document):
    """One YAML document (a dict) as text ending in a newline."""
    return "\n".join(_lines(document, 0)) + "\n"

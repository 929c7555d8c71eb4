"""Which glibc an ELF file needs: the newest GLIBC_x.y symbol version it names, read from its
bytes (the same strings `objdump -T` shows), and version arithmetic on 'x.y' strings. Used by the
release bundle (bundle.py) for MANIFEST.json and by its floor check (carried_glibc.py)."""

import os
import re

GLIBC_VERSION = re.compile(rb"GLIBC_(\d+)\.(\d+)")


def version_key(version):
    """(major, minor) of 'x.y' (or 'x.y.z'), for comparisons; ValueError for anything else."""
    parts = version.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"not a glibc version: {version!r} (expected e.g. 2.31)")
    return int(parts[0]), int(parts[1])


def is_elf(path):
    """Whether `path` is an ELF file (not a script or data)."""
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def newest(paths):
    """The newest GLIBC_x.y symbol version any of `paths` names, as 'x.y' ('' if none): the
    oldest C library they run on."""
    found = (0, 0)
    for path in paths:
        with open(path, "rb") as f:
            for major, minor in GLIBC_VERSION.findall(f.read()):
                found = max(found, (int(major), int(minor)))
    return f"{found[0]}.{found[1]}" if found != (0, 0) else ""


def needs(directory, skip=None):
    """{path relative to `directory`: its glibc need ('' for none)} for every ELF file under
    `directory`, except those under the relative directory `skip`."""
    found = {}
    for root, dirs, names in os.walk(directory):
        rel_root = os.path.relpath(root, directory)
        if skip and (rel_root == skip or rel_root.startswith(skip + os.sep)):
            dirs[:] = []
            continue
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path) and is_elf(path):
                found[os.path.normpath(os.path.join(rel_root, name))] = newest([path])
    return found

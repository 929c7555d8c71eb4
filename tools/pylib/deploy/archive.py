"""Unpacking tar archives that came from elsewhere (a release bundle, a host's or a pod's results)
without letting them write outside their target: every extraction in pylib goes through
safe_extract, which refuses an archive at its first member that is absolute, has a '..'
in its path, is a link pointing outside the target, or is a device, FIFO or other special file."""

import os
import posixpath
import tarfile


class UnsafeArchive(Exception):
    """An archive member would write outside the target, or is not a plain file, directory or
    link; the message names it."""


def _inside(path):
    """Whether the normalised relative POSIX `path` stays inside its root."""
    return path != ".." and not path.startswith("../") and not posixpath.isabs(path)


def check_member(member):
    """UnsafeArchive unless `member` stays inside the directory it is unpacked into."""
    name = member.name
    if posixpath.isabs(name) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchive(f"{name!r}: an absolute path")
    if ".." in name.split("/"):  # even one that stays inside by name may climb out through a link
        raise UnsafeArchive(f"{name!r}: a path with '..'")
    path = posixpath.normpath(name)
    if member.issym() or member.islnk():
        if posixpath.isabs(member.linkname):
            raise UnsafeArchive(f"{name!r}: a link to the absolute path {member.linkname!r}")
        # A symbolic link resolves from its own directory, a hard link from the archive's root.
        base = posixpath.dirname(path) if member.issym() else ""
        if not _inside(posixpath.normpath(posixpath.join(base, member.linkname))):
            raise UnsafeArchive(f"{name!r}: a link to {member.linkname!r}, outside the target")
    elif not (member.isfile() or member.isdir()):
        raise UnsafeArchive(f"{name!r}: not a file, directory or link (a device or FIFO)")


def check_tarball(path):
    """UnsafeArchive unless every member of the tarball at `path` passes check_member: for an
    archive unpacked elsewhere (a remote host's tar), checked here before it is shipped."""
    with tarfile.open(path) as archive:
        for member in archive.getmembers():
            check_member(member)


def safe_extract(archive, target, stream=False):
    """Unpacks the open tarfile `archive` into `target`, which is made if needed; UnsafeArchive
    at the first unsafe member (check_member). A file archive is checked whole before anything
    is written; a `stream` (mode "r|") can only be checked member by member, so the members
    before an unsafe one are unpacked. Returns the members' names."""
    if not stream:
        for member in archive.getmembers():
            check_member(member)
    os.makedirs(target, exist_ok=True)
    names = []
    for member in archive:
        check_member(member)
        # Python's own filter as well, where it has one: it also follows links already
        # unpacked, and drops set-uid bits.
        if hasattr(tarfile, "tar_filter"):
            archive.extract(member, target, filter="tar")
        else:
            archive.extract(member, target)
        names.append(member.name)
    return names

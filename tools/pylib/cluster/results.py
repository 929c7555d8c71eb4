"""Where remote hosts leave a run's results, read by the launcher: an s3:// prefix (through the
AWS CLI) or a file:// directory (tests). Each host uploads its run directory to PREFIX/HOST/ and
then a marker PREFIX/HOST.done, PREFIX/HOST.failed (it could not start its processes) or
PREFIX/HOST.reclaimed (a spot interruption stopped them) whose text says how its processes
ended. As each process ends its host leaves PREFIX/NAME.exit-STATUS (empty), so that the
launcher learns of a death while the host's other processes still run."""

import re

import os
import shutil
import subprocess


class StoreError(Exception):
    """A listing or copy failed; the message says which and why."""


def open_store(prefix, aws_options=()):
    """The store at `prefix` (s3://BUCKET/KEY or file:///PATH); aws_options are appended to
    every aws command (--region, --endpoint-url)."""
    if prefix.startswith("s3://"):
        return S3Store(prefix, list(aws_options))
    if prefix.startswith("file://"):
        return FileStore(prefix[len("file://"):])
    raise StoreError(f"{prefix}: not an s3:// or file:// URL")


MARKERS = ("done", "failed", "reclaimed")
_EXIT = re.compile(r"(.+)\.exit-(\d+)")


def markers_of(names):
    """{host: 'done' | 'failed' | 'reclaimed'} from file names under the prefix ('failed'
    wins)."""
    found = {}
    for name in names:
        host, _, kind = name.rpartition(".")
        if host and kind in MARKERS and found.get(host) != "failed":
            found[host] = kind
    return found


def exits(names):
    """{process name: exit status} from the NAME.exit-STATUS names under the prefix."""
    return {m.group(1): int(m.group(2)) for m in map(_EXIT.fullmatch, names) if m}


class FileStore:
    def __init__(self, path):
        self.path = path.rstrip("/")

    def names(self):
        """The names directly under the prefix ([] before any)."""
        try:
            return os.listdir(self.path)
        except FileNotFoundError:
            return []

    def markers(self):
        return markers_of(self.names())

    def marker_text(self, host, kind):
        with open(os.path.join(self.path, f"{host}.{kind}")) as f:
            return f.read().strip()

    def collect(self, host, run_dir):
        """Copies the host's files into run_dir; False if it left none."""
        source = os.path.join(self.path, host)
        if not os.path.isdir(source):
            return False
        shutil.copytree(source, run_dir, dirs_exist_ok=True)
        return True


class S3Store:
    def __init__(self, prefix, aws_options):
        self.prefix = prefix.rstrip("/")
        self.aws_options = aws_options

    def _aws(self, *argv):
        r = subprocess.run(["aws", "s3", *argv, *self.aws_options], capture_output=True,
                           text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise StoreError(f"aws s3 {' '.join(argv)}: {(r.stderr or r.stdout).strip()}")
        return r.stdout

    def names(self):
        """The objects' names directly under the prefix ([] before any)."""
        # `aws s3 ls` exits 1 when nothing matches the prefix yet.
        r = subprocess.run(["aws", "s3", "ls", self.prefix + "/", *self.aws_options],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode not in (0, 1):
            raise StoreError(f"aws s3 ls {self.prefix}/: {(r.stderr or r.stdout).strip()}")
        # Lines: "DATE TIME SIZE NAME" for objects, "PRE NAME/" for prefixes.
        return [line.split(None, 3)[3] for line in r.stdout.splitlines()
                if len(line.split(None, 3)) == 4]

    def markers(self):
        return markers_of(self.names())

    def marker_text(self, host, kind):
        return self._aws("cp", "--only-show-errors", f"{self.prefix}/{host}.{kind}", "-").strip()

    def collect(self, host, run_dir):
        self._aws("cp", "--only-show-errors", "--recursive", f"{self.prefix}/{host}/", run_dir)
        return True

"""The cluster file's [data] table: the data set every host with workers stages into a local
cache before the workers start (tools/deploy/stage_data), and the --data_dir they then get.

  [data]
  name = "fashion-mnist"      # required; letters, digits, '_', '.', '-'
  source = "file:///shared/datasets/fashion-mnist"   # required: where the files are, one of
                              #   file:///ABS/DIR (a file system every host mounts),
                              #   s3://BUCKET/PREFIX (the aws CLI on the host), https://HOST/PATH
                              #   (or http://), or "bundle": shipped with the job (small sets)
  path = "/usr/share/datasets/fashion-mnist"   # source = "bundle" only, and then required: the
                              # local directory tools/launch packs into the bundle it ships, as
                              # worker_files/NAME/ (relative to the cluster file's directory)
  manifest = "fashion-mnist.sha256"   # default "NAME.sha256"; relative to the cluster file's
                              # directory: `sha256sum` lines ("HEX  PATH") of every file, written
                              # by tools/launch --write_data_manifest=DIR
  cache = "~/r2sp-data"       # default "~/r2sp-data": each host stages into
                              # CACHE/NAME-DIGEST (DIGEST: 12 hex of the manifest's sha256)
  [[host]] data_cache = "/scratch/data"   # this host's CACHE instead

The manifest stays with the cluster file, on the launcher's side: the hashes a host checks come
from the person who launches, not from the place the data are fetched from. Every problem is a
ClusterFileError "FILE:LINE: ..." as in cluster_file.py."""

import dataclasses
import hashlib
import importlib.machinery
import importlib.util
import os
import re

KEYS = ("name", "source", "path", "manifest", "cache")
DEFAULT_CACHE = "~/r2sp-data"
BUNDLE = "bundle"
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_STAGE_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "deploy", "stage_data")


def _stage_data_module():
    """tools/deploy/stage_data as a module: its manifest parser is the one the hosts run."""
    loader = importlib.machinery.SourceFileLoader("r2sp_stage_data", _STAGE_DATA)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


stage_data = _stage_data_module()


@dataclasses.dataclass(frozen=True)
class DataSet:
    name: str
    source: str           # a file://, s3://, http(s):// URL, or "bundle"
    manifest_path: str    # as resolved (relative to the cluster file's directory)
    files: tuple          # (path, sha256) of every file, the manifest's order
    cache: str            # the default cache directory (unexpanded: may start with ~)
    path: str = ""        # source "bundle": the local directory shipped with the job

    @property
    def manifest_text(self):
        """The manifest as the hosts get it: one "HEX  PATH" line per file."""
        return "".join(f"{digest}  {path}\n" for path, digest in self.files)

    @property
    def dir_name(self):
        """NAME-DIGEST: a changed manifest stages into a directory of its own."""
        return f"{self.name}-{hashlib.sha256(self.manifest_text.encode()).hexdigest()[:12]}"

    def host_dir(self, host):
        """Where `host` stages the data set (unexpanded), its workers' --data_dir."""
        return f"{(host.data_cache or self.cache).rstrip('/')}/{self.dir_name}"

    def source_on(self, bundle_dir):
        """The URL a host fetches from; `bundle_dir`: where the bundle is on it (for "bundle")."""
        if self.source == BUNDLE:
            return f"file://{bundle_dir.rstrip('/')}/worker_files/{self.name}"
        return self.source


def check(checker, values, cluster_path):
    """The DataSet of the [data] table `values` (None without one); `checker`: cluster_file's
    _Checker (fail, value, known_keys), which names the line of each problem."""
    if values is None:
        return None
    where = ("data",)
    checker.known_keys(where, values, "data", KEYS)
    name = checker.value(where, values, "name", "data", str)
    if name is None:
        checker.fail(where, None, "data: name is required (the data set's cache directory)")
    if not _NAME.fullmatch(name) or set(name) == {"."}:
        checker.fail(where, "name", f"data: name {name!r} must be letters, digits, '_', '.' and "
                                    "'-' (and not only dots)")
    source = checker.value(where, values, "source", "data", str)
    if source is None:
        checker.fail(where, None, 'data: source is required (file:///DIR, s3://BUCKET/PREFIX, '
                                  'https://HOST/PATH or "bundle")')
    if source != BUNDLE and not source.startswith(stage_data.SCHEMES):
        checker.fail(where, "source", f"data: source {source!r} must be a file:///DIR, "
                                      's3://BUCKET/PREFIX or https://HOST/PATH URL, or "bundle"')
    if source.startswith("file://") and not source[len("file://"):].startswith("/"):
        checker.fail(where, "source", f"data: source {source!r} must name an absolute path "
                                      "(file:///DIR)")
    if source.startswith("s3://") and not source[len("s3://"):].split("/")[0]:
        checker.fail(where, "source", f"data: source {source!r} names no bucket")
    local = checker.value(where, values, "path", "data", str)
    if source == BUNDLE and local is None:
        checker.fail(where, "source", 'data: source = "bundle" needs path (the local directory '
                                      "shipped with the job)")
    if source != BUNDLE and local is not None:
        checker.fail(where, "path", 'data: path is for source = "bundle" only (the local '
                                    "directory shipped with the job)")
    if local is not None:
        local = os.path.join(os.path.dirname(cluster_path), os.path.expanduser(local))
    manifest = checker.value(where, values, "manifest", "data", str, default=name + ".sha256")
    cache = checker.value(where, values, "cache", "data", str, default=DEFAULT_CACHE)
    path = os.path.join(os.path.dirname(cluster_path), os.path.expanduser(manifest))
    line = "manifest" if "manifest" in values else "name"
    try:
        with open(path) as f:
            files = stage_data.parse_manifest(f.read())
    except OSError as e:
        checker.fail(where, line, f"data: cannot read the manifest {path}: {e.strerror} (write "
                                  "it with tools/launch --write_data_manifest=DIR)")
    except UnicodeDecodeError:
        checker.fail(where, line, f"data: the manifest {path} is not UTF-8 text")
    except stage_data.ManifestError as e:
        checker.fail(where, line, f"data: the manifest {path}: {e}")
    return DataSet(name, source, path, tuple(files), cache, local or "")


def write_manifest(directory):
    """The manifest text of every file under `directory` (sorted, '/'-separated paths; hidden
    files and directories, such as a staging's .part files, left out); ValueError if there are
    none or it is not a directory."""
    if not os.path.isdir(directory):
        raise ValueError(f"{directory} is not a directory")
    lines = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(n for n in names if not n.startswith(".")):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, directory).replace(os.sep, "/")
            lines.append(f"{stage_data.sha256_of(full)}  {rel}\n")
    if not lines:
        raise ValueError(f"{directory} holds no files")
    return "".join(sorted(lines, key=lambda l: l.split("  ", 1)[1]))


def has_data_dir(flags):
    """Whether worker flags set --data_dir themselves (then staging leaves them alone)."""
    return any(f == "--data_dir" or f.startswith("--data_dir=") for f in flags)

"""A small data set shipped with the job: for a [data] table with source = "bundle", tools/launch
makes a copy of the release bundle that also holds the data set's files as
worker_files/NAME/PATH (each checked against the manifest first), with its MANIFEST.json
extended to list them, and ships that copy in place of the bundle. Every host then stages from
its own unpacked bundle (stage_data --source=file://BUNDLE/worker_files/NAME), as from any
other source.

The copy is made the same way every time (file times, owners and the gzip header fixed, as
bundle.tar makes the bundle), so a second job with the same bundle and data set ships
byte-for-byte the same tarball, and hosts that hold it intact are not sent it again."""

import copy
import gzip
import io
import json
import os
import tarfile

from ..cluster import bundle as release_bundle
from ..cluster import data_table
from ..job.errors import JobError


def files_of(data):
    """[(path in the bundle, local file)] of the data set's files; JobError unless every file
    is there with the manifest's sha256."""
    if not data.path or not os.path.isdir(data.path):
        raise JobError(f"data: path {data.path!r} is not a directory (the data set to ship with "
                       'the job, for source = "bundle")')
    found = []
    for rel, digest in data.files:
        local = os.path.join(data.path, rel)
        got = release_bundle.sha256(local) if os.path.isfile(local) else None
        if got is None:
            raise JobError(f"data: {local}, listed in {data.manifest_path}, is missing")
        if got != digest:
            raise JobError(f"data: {local}'s sha256 differs from {data.manifest_path}'s; write "
                           f"the manifest again (tools/launch --write_data_manifest={data.path})")
        found.append((f"worker_files/{data.name}/{rel}", local))
    return found


def _clean(info):
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0
    return info


def with_data(tarball, data, out_dir):
    """The copy of the bundle `tarball` that carries the data set, written as
    OUT_DIR/TOP.tar.gz (TOP: the bundle's directory, as the backends expect); returns its path."""
    top, manifest_text = release_bundle.tarball_manifest(tarball)
    manifest = json.loads(manifest_text)
    added = files_of(data)
    extended = copy.deepcopy(manifest)
    prefix = f"worker_files/{data.name}/"
    extended["files"] = {k: v for k, v in extended["files"].items() if not k.startswith(prefix)}
    extended["files"].update({rel: digest for (rel, _), (_, digest) in zip(added, data.files)})
    body = (json.dumps(extended, indent=1, sort_keys=True) + "\n").encode()
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, top + ".tar.gz")
    # Level 1: the data set's files are mostly compressed already; this runs on every launch.
    with open(target + ".tmp", "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                          compresslevel=1) as gz, \
            tarfile.open(fileobj=gz, mode="w") as out, tarfile.open(tarball) as original:
        for member in original:
            if member.name == f"{top}/MANIFEST.json":
                continue
            prefix = f"{top}/worker_files/{data.name}"
            if member.name == prefix or member.name.startswith(prefix + "/"):
                continue  # the bundle's own copy of a same-named directory gives way
            out.addfile(_clean(member), original.extractfile(member) if member.isfile() else None)
        for rel, local in added:
            out.add(local, arcname=f"{top}/{rel}", filter=_clean)
        info = _clean(tarfile.TarInfo(f"{top}/MANIFEST.json"))
        info.size, info.mode = len(body), 0o644
        out.addfile(info, io.BytesIO(body))
    os.replace(target + ".tmp", target)
    return target


def prepare(tarball, cluster, out_dir):
    """The tarball to ship: `tarball` itself, or with a "bundle" data source its copy with the
    data set (with_data) in `out_dir` (None: the files are only checked, the copy's path is
    None)."""
    data = cluster.data
    if not tarball or data is None or data.source != data_table.BUNDLE:
        return tarball
    if out_dir is None:
        files_of(data)
        return None
    return with_data(tarball, data, out_dir)

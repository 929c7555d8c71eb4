"""What the Kubernetes backend (k8s_backend) gets back from its pods: each pod prints its result
files as a base64 tar.gz between BEGIN and END lines at the end of its log, and the launcher
unpacks them from the fetched logs into the run directory."""
import base64
import io
import os
import tarfile

from ..job.errors import JobError
from .archive import UnsafeArchive, check_member

BEGIN, END = "R2SP-RESULTS-BEGIN ", "R2SP-RESULTS-END"


def extract_results(log_path, run_dir):
    """Unpacks every R2SP-RESULTS block of the log at `log_path` into `run_dir` and removes the
    blocks from the log; returns the names of the files it wrote. Only regular files at the top
    of the archive are taken, and only those archive.check_member passes; a block cut short (a
    pod killed while printing it) is dropped."""
    with open(log_path, errors="replace") as f:
        lines = f.read().splitlines(keepends=True)
    kept, written, block = [], [], None
    for line in lines:
        if block is None and line.startswith(BEGIN):
            block = []
        elif block is not None and line.strip() == END:
            written += _unpack("".join(block), run_dir)
            block = None
        elif block is not None:
            block.append(line.strip())
        else:
            kept.append(line)
    with open(log_path, "w") as f:
        f.writelines(kept)
    return written


def safe(member):
    """Whether archive.check_member passes `member` (one it refuses is left out)."""
    try:
        check_member(member)
        return True
    except UnsafeArchive:
        return False


def _unpack(encoded, run_dir):
    try:
        data = base64.b64decode(encoded, validate=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            written = []
            for member in archive.getmembers():
                name = os.path.normpath(member.name)
                if safe(member) and member.isfile() and "/" not in name and not name.startswith("."):
                    with open(os.path.join(run_dir, name), "wb") as out:
                        out.write(archive.extractfile(member).read())
                    written.append(name)
            return written
    except (ValueError, tarfile.TarError, EOFError, OSError) as e:
        raise JobError(f"a results block in the logs cannot be read: {e}")

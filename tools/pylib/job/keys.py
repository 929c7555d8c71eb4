"""The job's CurveZMQ keys for tools/launch --auth=curve (docs/SECURITY.md): one key pair per
role, as the keygen binary (//common/auth:keygen) writes them into a directory:

  scheduler.pub server.pub worker.pub      every process loads all three (Z85 text)
  scheduler.key server.key worker.key      a process loads only its own role's; mode 0600

The launcher makes them once per job into RUN_DIR/keys (0700) unless --keys_dir names a
directory of keys made before, and gives every process --auth=curve --keys_dir=DIR. This module
only ever handles the keys as files: it copies and checks them, never prints, logs or records
their contents (the Kubernetes backend alone reads them, into the job's Secrets)."""

import os
import stat
import subprocess

from .errors import JobError

AUTH_MODES = ("none", "curve")
ROLES = ("scheduler", "server", "worker")
KEYS = "keys"  # RUN_DIR/keys
KEYGEN = os.path.join("common", "auth", "keygen")  # under --bin_dir


def public_files():
    """The public key files every process needs."""
    return [role + ".pub" for role in ROLES]


def secret_file(role):
    return role + ".key"


def files_for(roles):
    """The files a host running processes of `roles` needs: every public key and the secret
    keys of those roles only, in ROLES order."""
    return public_files() + [secret_file(r) for r in ROLES if r in set(roles)]


def curve(args):
    """Whether the job `args` describes (tools/launch options) runs with --auth=curve."""
    return getattr(args, "auth", None) == "curve"


def keys_dir(args):
    """Where the processes of a local job find the keys, and where a remote backend takes them
    from: --keys_dir, else RUN_DIR/keys (a dry run's, before there is a run directory, is
    "RUN_DIR/keys")."""
    return args.keys_dir or os.path.join(args.run_dir or "RUN_DIR", KEYS)


def node_flags(keys):
    """The flags every scheduler, server and worker gets to use the keys in directory `keys`
    (a path as the process sees it)."""
    return ["--auth=curve", "--keys_dir=" + keys]


def flags(args):
    """node_flags of a local job `args`, or [] without --auth=curve."""
    return node_flags(keys_dir(args)) if curve(args) else []


def check(directory, roles=ROLES):
    """JobError unless `directory` holds every public key and the secret keys of `roles`, each
    secret key file closed to group and others (as the binaries require: they refuse to start
    otherwise). Reads no key."""
    for name in files_for(roles):
        path = os.path.join(directory, name)
        try:
            mode = os.stat(path).st_mode
        except OSError as e:
            raise JobError(f"{path}: {e.strerror}: --auth=curve needs the job's keys "
                           "(tools/keygen DIR makes them)")
        if not stat.S_ISREG(mode):
            raise JobError(f"{path} is not a file")
        if name.endswith(".key") and mode & 0o077:
            raise JobError(f"secret key file {path} has mode {stat.S_IMODE(mode):04o}: group "
                           f"and others must have no access (chmod 600 {path})")


def keygen(bin_dir):
    """The keygen binary under `bin_dir`; JobError if it is not there."""
    path = os.path.join(bin_dir, KEYGEN)
    if not os.access(path, os.X_OK):
        raise JobError(f"{path} not found: --auth=curve makes the job's keys with it; build it "
                       "(bazel build -c opt //common/auth:keygen), or make keys with tools/keygen "
                       "DIR and pass --keys_dir=DIR")
    return path


def generate(bin_dir, directory, replace=False):
    """Makes a fresh key pair per role in `directory` (created 0700) with the keygen binary;
    with `replace` over keys already there. JobError (with keygen's message) if it fails."""
    argv = [keygen(bin_dir), directory] + (["--force"] if replace else [])
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise JobError(f"making the job's keys failed ({r.returncode}): "
                       f"{(r.stderr or r.stdout).strip()}")
    check(directory)


def has_keys(directory):
    return any(os.path.exists(os.path.join(directory, n)) for n in files_for(ROLES))


def prepare(args, roles=ROLES):
    """The directory of the keys the job `args` runs with, once they are there: --keys_dir as
    given (checked for `roles`), or RUN_DIR/keys, made now with args.bin_dir's keygen; a
    resumed job (args.resume) keeps the keys its first attempt made. None without
    --auth=curve. JobError if they cannot be had."""
    if not curve(args):
        if getattr(args, "keys_dir", ""):
            raise JobError("--keys_dir needs --auth=curve")
        return None
    if args.keys_dir:
        check(args.keys_dir, roles)
        return args.keys_dir
    directory = keys_dir(args)
    if getattr(args, "resume", "") and has_keys(directory):
        check(directory, roles)
        return directory
    # A new job gets new keys, also in a run directory an earlier job used.
    generate(args.bin_dir, directory, replace=has_keys(directory))
    return directory


def describe(args):
    """--dry_run's line on where the keys come from (no key is made or read)."""
    if args.keys_dir:
        return f"# --auth=curve: the keys in {args.keys_dir}"
    directory = keys_dir(args)
    return (f"# --auth=curve: the job's keys, made first by "
            f"{os.path.join(args.bin_dir, KEYGEN)} {directory}")


def copy(source, target, names):
    """Copies the key files `names` from directory `source` into `target` (created; 0700),
    each 0600 from its creation on."""
    os.makedirs(target, mode=0o700, exist_ok=True)
    os.chmod(target, 0o700)
    for name in names:
        path = os.path.join(target, name)
        if os.path.exists(path):
            os.remove(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as out, open(os.path.join(source, name), "rb") as f:
            out.write(f.read())


def read(directory, name):
    """A key file's text, stripped: for the Kubernetes Secrets only. Never print it."""
    with open(os.path.join(directory, name)) as f:
        return f.read().strip()

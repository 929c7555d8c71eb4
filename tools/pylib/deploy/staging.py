"""The data step every remote backend runs before any worker starts: on each host with workers,
the bundle's stage_data (tools/deploy/stage_data) fetches the cluster file's [data] set into the
host's cache and verifies it against the manifest (cluster/data_table.py); the workers then get
--data_dir=that directory (role_commands.run_role_args). The backends differ only in how they
reach the host: ssh (stage_over_ssh), a Slurm step per node, a pod's init container, EC2's
user-data."""

import shlex

from ..cluster import role_commands

STAGE_DATA = "share/r2sp/deploy/stage_data"  # in the bundle


def hosts(cluster):
    """The hosts that stage the data set: those with workers (none without [data])."""
    if cluster.data is None:
        return []
    return [h for h in cluster.hosts if any(p.role == "worker" for p in h.processes)]


def stage_args(data, host, bundle_dir, manifest):
    """stage_data's arguments for `host` (unquoted): the source (a "bundle" source is the
    bundle's worker_files/NAME on the host), the manifest file ('-': stdin), the host's target
    directory (unexpanded: may start with ~) and the host's name for messages."""
    return [f"{bundle_dir.rstrip('/')}/{STAGE_DATA}", "--source=" + data.source_on(bundle_dir),
            "--manifest=" + manifest, "--target=" + data.host_dir(host), "--host=" + host.name]


def home_path(path):
    """`path` with a leading ~ written as $HOME (for a script that leaves $HOME live)."""
    return "$HOME" + path[1:] if path == "~" or path.startswith("~/") else path


def remote_command(data, host, bundle_dir):
    """The remote shell command that stages on `host`, the manifest on its stdin."""
    program, *args = stage_args(data, host, bundle_dir, "-")
    target = data.host_dir(host)
    args[2] = "--target=" + role_commands.remote_path(target)  # ~ means $HOME there
    return f"exec {role_commands.remote_path(program)} " + " ".join(
        a if a.startswith("--target=") else shlex.quote(a) for a in args)


def failure(host, data, output):
    """The launcher's message when staging on `host` failed (`output`: what stage_data said)."""
    return (f"staging the data set {data.name} on {host.name} failed, so no process was started: "
            f"{output.strip() or 'no output'}")

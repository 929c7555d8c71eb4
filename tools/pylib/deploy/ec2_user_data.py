"""The EC2 user-data of one host of a cluster-file job: tools/deploy/ec2_user_data.sh with its
settings filled in (the job, the bundle and results URLs, and the run_role arguments of each of
the host's processes). Pure: ec2_backend passes the text to run-instances and --dry_run prints it.

Each host advertises its own private address, known only on the instance: the arguments name it
as "$advertise" (and the run directory as "$out", the keys' directory as "$keys"), which the
script sets before it starts them. With --auth=curve the user-data holds only where the host's
key files are (keys_url) and their names, never a key: the script fetches them as it fetches
the bundle, into a directory only root may enter. With a [data] table a host with workers
stages the data set (the bundle's stage_data, the manifest in the user-data) after unpacking
the bundle and before any process starts; its workers' --data_dir is "$data_dir". A
replacement instance (HOST.r1, ec2_supervision) gets the user-data of its host entry with only
the lost processes, each under its replacement's name (worker1.r1)."""

import dataclasses
import os
import re
import shlex

from ..cluster import role_commands
from . import shell

TEMPLATE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "deploy", "ec2_user_data.sh")
# EC2 refuses user-data over 16 KB (before base64).
MAX_BYTES = 16384
# Stand-ins in run_role arguments for shell variables of the script.
OUT = "@R2SP_OUT@"
ADVERTISE = "@R2SP_ADVERTISE@"
KEYS = "@R2SP_KEYS@"
DATA = "@R2SP_DATA@"
_VARIABLES = {OUT: '"$out"', ADVERTISE: '"$advertise"', KEYS: '"$keys"', DATA: '"$data_dir"'}
_STAND_IN = re.compile("|".join(re.escape(s) for s in _VARIABLES))


@dataclasses.dataclass(frozen=True)
class Settings:
    job: str            # the cluster's job name
    run: str            # this run's id (the run directory's name)
    bundle_url: str     # where the instance fetches the release tarball
    bundle_name: str    # the bundle's directory in the tarball (r2sp-VERSION-VARIANT)
    bundle_sha256: str  # the tarball's checksum, checked before unpacking
    results_url: str    # the job's results: each host uploads to RESULTS_URL/JOB/RUN/HOST/
    lifetime_minutes: int  # the instance powers itself off after this long, whatever happens
    keys_url: str = ""  # --auth=curve: where this host's key files are (s3:// or file://)
    key_files: str = ""  # their names, space-separated: the public keys, its roles' secret keys
    data_name: str = ""  # [data] (hosts with workers): the data set's name,
    data_source: str = ""  # its source URL (or "bundle"),
    data_manifest: str = ""  # its manifest's text,
    data_target: str = ""  # and where this host stages it (a leading ~: root's home)
    checkpoint_url: str = ""  # the run's checkpoint_url (s3://: the AWS CLI is installed)
    spot: bool = False  # a spot instance: it watches for an interruption notice

    @staticmethod
    def data_of(cluster, host):
        """The data_* settings of `host` ({} when it stages nothing)."""
        if cluster.data is None or not any(p.role == "worker" for p in host.processes):
            return {}
        data = cluster.data
        return {"data_name": data.name, "data_source": data.source,
                "data_manifest": data.manifest_text, "data_target": data.host_dir(host)}


def shell_word(arg):
    """`arg` quoted for bash, its stand-ins (OUT, ADVERTISE, KEYS) becoming the script's variables."""
    return shell.shell_word(arg, _STAND_IN, lambda found: _VARIABLES[found.group()])


def host_processes(cluster, host, scheduler_ip, extra_flags, keys=False, checkpoint_url=None,
                   replacing=None):
    """[(process name, run_role arguments)] of `host`, the scheduler first. Every host advertises
    its private address (or, when the cluster file names an interface, that interface's); the
    scheduler's own host reaches it at its own address, the others at `scheduler_ip`. With
    `keys` (--auth=curve) each uses the keys the script fetched; servers copy their checkpoints
    to `checkpoint_url` (the run's) and restore from it. `replacing` ({process: replacement
    name}, for a replacement instance): only those processes, each under its new name."""
    scheduler_host = cluster.scheduler_host()
    own = ADVERTISE if host.name == scheduler_host.name else scheduler_ip
    hosts = tuple(dataclasses.replace(h, address=own, interface=None)
                  if h.name == scheduler_host.name else h for h in cluster.hosts)
    seen_from_host = dataclasses.replace(cluster, hosts=hosts)
    advertised = dataclasses.replace(host, address=None if host.interface else ADVERTISE)
    data_dir = DATA if cluster.data else None
    processes = [p for _, h, p in role_commands.scheduler_first(cluster) if h.name == host.name]
    if replacing is not None:
        processes = [dataclasses.replace(p, name=replacing[p.name]) for p in processes
                     if p.name in replacing]
    return [(p.name, role_commands.run_role_args(seen_from_host, advertised, p, OUT, extra_flags,
                                                 KEYS if keys else None, data_dir, checkpoint_url))
            for p in processes]


def render(settings, host_name, processes, template=None):
    """The user-data text for `host_name`: the template with `settings` and a start_processes
    function that starts `processes` ([(name, run_role args)]). ValueError if it is too big."""
    if template is None:
        with open(TEMPLATE) as f:
            template = f.read()
    values = dataclasses.asdict(settings)
    values["results"] = f"{settings.results_url.rstrip('/')}/{settings.job}/{settings.run}"
    del values["results_url"]
    values["host"] = host_name
    lines = [f"{key}={shlex.quote(str(value).lower() if isinstance(value, bool) else str(value))}"
             for key, value in values.items()]
    lines.append("start_processes() {")
    lines += [f"  start {shlex.quote(name)} " + " ".join(shell_word(a) for a in args)
              for name, args in processes]
    lines.append("}")
    if "# @SETTINGS@" not in template:
        raise ValueError("the user-data template has no '# @SETTINGS@' line")
    text = template.replace("# @SETTINGS@", "\n".join(lines), 1)
    size = len(text.encode())
    if size > MAX_BYTES:
        fewer = "; or a [data] manifest of fewer files" if settings.data_manifest else ""
        raise ValueError(f"the user-data of {host_name} is {size} bytes; EC2 takes at most "
                         f"{MAX_BYTES} (fewer or shorter flags{fewer})")
    return text

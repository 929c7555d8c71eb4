"""The cluster file: a TOML description of a multi-machine R2SP job (which host runs the
scheduler, how many servers and workers, on which ports and GPUs), read and checked before any
process starts. Every problem is a ClusterFileError whose message starts "FILE:LINE: ".

A host is a machine with `slots` as in a horovodrun hostfile (here: `workers`), plus the
servers and the one scheduler of a parameter-server job (dmlc-tracker, BytePS). The format:

  [job]                     # required
  name = "cnn-r2sp"         # default "r2sp"; letters, digits, '_', '.', '-' (run dirs, tags)
  mode = "r2sp"             # required: the scheduler's --sync (bsp, ssp, asp, r2sp, easgd, eawild)
  workdir = "~/r2sp"        # default "~/r2sp": where the release bundle unpacks on each host
  auth = "curve"            # default "none": curve encrypts and authenticates every connection
                            # with the job's keys (tools/launch --auth; docs/SECURITY.md)
  worker_cmd = "python3 train.py --lr=0.1"   # default none: every worker runs this command (a
                            # Python worker, tools/launch --worker_cmd) in place of the binary
  checkpoint_url = "file:///shared/ckpt"   # default none: servers' checkpoints copied there
                            # (file:// on storage every server host shares, or s3://BUCKET/
                            # PREFIX through the hosts' aws CLI; docs/DEPLOY.md)

  [ports]                   # optional; the defaults:
  scheduler = 9000          # the scheduler's port
  server = 9100             # the k-th server on a host (k = 0, 1, ...) listens at 9100 + k
  worker = 9200             # the k-th worker on a host listens at 9200 + k

  [flags]                   # optional: flags for every process of a role (split as a shell does)
  scheduler = "--r2sp_order=auto"
  server = "--lr=0.03 --momentum=0.9"
  worker = "--device=cuda --model=cnn --data=fashion-mnist --epochs=2"

  [ssh]                     # optional, for the ssh backend; all keys optional
  user = "ubuntu"
  port = 22                 # 1..65535
  identity = "~/.ssh/id_ed25519"
  options = ["StrictHostKeyChecking=accept-new"]   # each passed as -o OPTION

  [slurm] [k8s] [ec2]       # optional: each backend's own settings (BACKEND_TABLES; DEPLOY.md)

  [data]                    # optional: the data set the hosts stage before the workers start
                            # (name, source, manifest, cache: data_table.py)

  [[host]]                  # one per machine, at least one
  name = "gpu1"             # required, unique: how the launcher reaches it (DNS, IP, ssh alias)
  address = "10.0.0.11"     # the address the other hosts reach it at (default: name), or
  interface = "eth0"        # (not both) advertise this interface's address, looked up at start
  scheduler = true          # default false; exactly one host runs the scheduler
  servers = 1               # default 0
  workers = 2               # default 0 (horovodrun's slots)
  gpus = [0, 1]             # one GPU index per worker (len == workers), no repeats; each in
                            # [0, gpu_count) when gpu_count is given, else >= 0
  gpu_count = 8             # >= 1: the GPUs the machine has
  worker_flags = "--threads=4"   # extra flags for this host's workers, after [flags].worker
  worker_cmd = "python3 train.py"   # this host's workers run it (overrides job.worker_cmd)
  workdir = "/scratch/r2sp"      # overrides job.workdir on this host
  ssh_port = 2222                # overrides ssh.port for this host
  data_cache = "/scratch/data"   # overrides data.cache on this host

Over all hosts there must be at least one server and one worker. Processes are numbered in file
order, host by host: server0..server{S-1}, worker0..worker{W-1}; the scheduler is "scheduler".
`gpus` only picks each worker's card (the launcher passes --gpu=N); choose the device with
--device=cuda in [flags].worker or in a host's worker_flags. No two processes of a host may
share a port: the scheduler's port must not fall in the host's server or worker range, nor may
those ranges overlap (a host with 100 servers from 9100 reaches the workers' 9200)."""

import dataclasses
import re
import shlex
import tomllib

from ..job.keys import AUTH_MODES
from . import data_table
from .toml_lines import TomlLines

MODES = ("bsp", "ssp", "asp", "r2sp", "easgd", "eawild")
ROLES = ("scheduler", "server", "worker")
DEFAULT_PORTS = {"scheduler": 9000, "server": 9100, "worker": 9200}
_TABLES = {"job": ("name", "mode", "workdir", "auth", "worker_cmd", "checkpoint_url"), "ports": ROLES, "flags": ROLES,
           "ssh": ("user", "port", "identity", "options"),
           "host": ("name", "address", "interface", "scheduler", "servers", "workers", "gpus",
                    "gpu_count", "worker_flags", "workdir", "ssh_port", "worker_cmd",
                    "data_cache"),
           "data": data_table.KEYS}
# Tables a backend reads (cluster.backend_options[NAME]): each key's type, checked here like
# the others; what they mean is documented by the backend (slurm_backend, k8s_backend,
# ec2_backend) and in docs/DEPLOY.md.
BACKEND_TABLES = {
    "slurm": {"partition": str, "account": str, "time": str, "sbatch_options": list,
              "signal_seconds": int},
    "k8s": {"image": str, "namespace": str, "gpu_resource": str, "image_pull_secret": str,
            "data_volume": str, "checkpoint_volume": str, "retries_per_index": bool},
    "ec2": {"region": str, "instance_type": str, "ami": str, "key_name": str, "subnet": str,
            "spot": bool, "bundle_url": str, "results_url": str, "instance_profile": str,
            "root_volume_gb": int, "ssh_cidr": str, "placement": str, "on_demand_fallback": bool},
}
_TABLES.update({name: tuple(keys) for name, keys in BACKEND_TABLES.items()})
_JOB_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_TOML_TYPES = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array",
               dict: "table"}


class ClusterFileError(ValueError):
    """A cluster file that cannot be read as one, or describes no valid job; the message starts
    "FILE:LINE: " (the path as given, the 1-based line of the offending key or table)."""


@dataclasses.dataclass(frozen=True)
class Process:
    name: str  # "scheduler", "server0", "worker3"
    role: str  # one of ROLES
    host: str  # the Host's name
    port: int  # listens at tcp://0.0.0.0:port
    gpu: int | None  # workers of a host with gpus; otherwise None
    worker_cmd: str = ""  # workers: the command it runs in place of the binary ("": the binary)


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    address: str | None  # advertised address: as given, else the name; None when interface is
    interface: str | None
    workdir: str  # the host's own, else job.workdir
    ssh_port: int | None  # the host's own, else ssh.port, else None (ssh's default)
    worker_flags: str  # this host's extra worker flags as written (shlex.split checked), or ""
    processes: tuple  # its Processes: the scheduler if any, servers, workers
    data_cache: str | None = None  # its own cache for the [data] set, else data.cache


@dataclasses.dataclass(frozen=True)
class Ssh:
    user: str | None
    port: int | None
    identity: str | None
    options: tuple


@dataclasses.dataclass(frozen=True)
class Cluster:
    path: str
    job_name: str
    mode: str
    workdir: str
    ports: dict  # role -> its first port (the scheduler's only one)
    flags: dict  # role -> list of flags for every process of the role
    ssh: Ssh
    hosts: tuple
    backend_options: dict  # backend name -> {key: value} of its table (BACKEND_TABLES)
    auth: str = "none"  # one of AUTH_MODES ([job] auth)
    data: data_table.DataSet | None = None  # the [data] table, if any
    checkpoint_url: str = ""  # [job] checkpoint_url: file:///PATH, s3://BUCKET/PREFIX or ""

    def processes(self):
        """Every process: the scheduler, then the servers in order, then the workers."""
        every = [p for host in self.hosts for p in host.processes]
        return [p for role in ROLES for p in every if p.role == role]

    @property
    def num_servers(self):
        return sum(p.role == "server" for p in self.processes())

    @property
    def num_workers(self):
        return sum(p.role == "worker" for p in self.processes())

    def scheduler_host(self):
        return next(h for h in self.hosts if any(p.role == "scheduler" for p in h.processes))

    def scheduler_endpoint(self):
        """"tcp://ADDR:PORT" of the scheduler. ADDR is its host's address, or the host's name
        when the host gives only an interface (whose address is known only on the host)."""
        host = self.scheduler_host()
        return f"tcp://{host.address or host.name}:{self.ports['scheduler']}"


def load(path):
    """The Cluster that the file at `path` describes; OSError if it cannot be read."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ClusterFileError(f"{path}:{line}: not UTF-8 text") from None
    return parse(text, path)


def parse(text, path="<cluster>"):
    """The Cluster that `text` describes (`path` names it in messages)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        found = re.search(r"\(at line (\d+), column \d+\)", str(e))
        line = int(found.group(1)) if found else max(1, len(text.splitlines()))
        raise ClusterFileError(f"{path}:{line}: invalid TOML: {e}") from None
    return _Checker(path, TomlLines(text)).cluster(document)


def _is_tables(value):
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _describe(value):
    return f"{_TOML_TYPES.get(type(value), 'date/time')} {value!r}"


class _Checker:
    """Turns the decoded document into a Cluster, or fails at the first problem it finds."""

    def __init__(self, path, lines):
        self.path, self.lines = path, lines

    def fail(self, table, key, message):
        raise ClusterFileError(f"{self.path}:{self.lines.of(table, key)}: {message}")

    def table(self, document, name):
        value = document.get(name, {})
        if not isinstance(value, dict):
            self.fail((), name, f"{name} must be a table ([{name}]), not {_describe(value)}")
        self.known_keys((name,), value, name, _TABLES[name])
        return value

    def known_keys(self, table, values, label, known):
        for key in values:
            if key not in known:
                self.fail(table, key, f"{label}: unknown key {key!r} (known: {', '.join(known)})")

    def value(self, table, values, key, label, kind, default=None, low=None, high=None):
        """values[key] if it is of `kind` (a str: non-empty; an int: in [low, high], where
        given), else fail; `default` if there is no such key."""
        if key not in values:
            return default
        value = values[key]
        if kind is int:
            fits = (isinstance(value, int) and not isinstance(value, bool) and
                    (low is None or value >= low) and (high is None or value <= high))
            want = "an integer" + (f" in {low}..{high}" if high is not None else
                                   f" >= {low}" if low is not None else "")
        else:
            fits = isinstance(value, kind) and (kind is not str or value != "")
            want = {bool: "true or false", str: "a non-empty string", list: "an array"}[kind]
        if not fits:
            self.fail(table, key, f"{label}: {key} must be {want}, not {_describe(value)}")
        return value

    def command(self, table, values, key, label, default=""):
        """values[key] (a command line that splits into words), else `default`; fail if not."""
        text = self.value(table, values, key, label, str, default=default)
        try:
            words = shlex.split(text)
        except ValueError as e:
            self.fail(table, key, f"{label}: cannot split {key} {text!r} into words: {e}")
        if text and not words:
            self.fail(table, key, f"{label}: {key} is blank (leave it out to run the worker binary)")
        return text

    def flags(self, table, values, key, label):
        """(values[key] or "", its flags as a shell splits them); fail if they do not split."""
        text = self.value(table, values, key, label, str, default="")
        try:
            return text, shlex.split(text)
        except ValueError as e:
            self.fail(table, key, f"{label}: cannot split {key} {text!r} into flags: {e}")

    def cluster(self, document):
        tables = ", ".join(_TABLES)
        for name, value in document.items():
            if name not in _TABLES:
                what = (f"table [{name}]" if isinstance(value, dict) else f"table [[{name}]]"
                        if value and _is_tables(value) else f"top-level key {name!r}")
                self.fail((), name, f"unknown {what} (known tables: {tables})")
        job = self.table(document, "job")
        mode = job.get("mode")
        if mode not in MODES:
            self.fail(("job",), "mode", f"job: mode must be one of {', '.join(MODES)}, " +
                      (f"not {_describe(mode)}" if "mode" in job else "and is required"))
        name = self.value(("job",), job, "name", "job", str, default="r2sp")
        if not _JOB_NAME.fullmatch(name) or set(name) == {"."}:
            self.fail(("job",), "name", f"job: name {name!r} must be letters, digits, '_', "
                                        "'.' and '-' (and not only dots)")
        workdir = self.value(("job",), job, "workdir", "job", str, default="~/r2sp")
        auth = job.get("auth", "none")
        if auth not in AUTH_MODES:
            self.fail(("job",), "auth", f"job: auth must be one of {', '.join(AUTH_MODES)}, "
                                        f"not {_describe(auth)}")
        worker_cmd = self.command(("job",), job, "worker_cmd", "job")
        checkpoint_url = self.value(("job",), job, "checkpoint_url", "job", str, default="")
        if checkpoint_url and not re.fullmatch(r"file:///\S*|s3://[^/\s]+/\S+", checkpoint_url):
            self.fail(("job",), "checkpoint_url", f"job: checkpoint_url {checkpoint_url!r} must be "
                      "file:///PATH on storage every server host shares, or s3://BUCKET/PREFIX")
        ports_table = self.table(document, "ports")
        ports = {role: self.value(("ports",), ports_table, role, "ports", int,
                                  DEFAULT_PORTS[role], 1, 65535) for role in ROLES}
        flags_table = self.table(document, "flags")
        flags = {role: self.flags(("flags",), flags_table, role, "flags")[1] for role in ROLES}
        ssh = self.ssh(self.table(document, "ssh"))

        hosts = document.get("host", [])
        if not _is_tables(hosts):
            self.fail((), "host", "host must be [[host]] tables")
        if not hosts:
            self.fail((), None, "no [[host]]: the job needs at least one host")
        counts = {role: 0 for role in ROLES}
        built, first_line = [], {}
        for index, values in enumerate(hosts):
            host = self.host(("host", index), values, index, counts, ports, workdir, ssh,
                             worker_cmd)
            if host.name in first_line:
                self.fail(("host", index), "name", f"host {host.name!r} appears twice (first "
                                                   f"at line {first_line[host.name]})")
            first_line[host.name] = self.lines.of(("host", index), "name")
            built.append(host)
        if counts["scheduler"] == 0:
            self.fail((), None, "no host runs the scheduler (set scheduler = true on one host)")
        for role in ("server", "worker"):
            if counts[role] == 0:
                self.fail((), None, f"no host runs a {role} (set {role}s = N on a host)")
        data = self.table(document, "data") if "data" in document else None
        return Cluster(self.path, name, mode, workdir, ports, flags, ssh, tuple(built),
                       {b: self.backend(document, b) for b in BACKEND_TABLES}, auth,
                       data_table.check(self, data, self.path), checkpoint_url)

    def backend(self, document, name):
        values = self.table(document, name)
        for key, kind in BACKEND_TABLES[name].items():
            self.value((name,), values, key, name, kind, None, 1 if kind is int else None)
            if kind is list and not all(isinstance(v, str) and v for v in values.get(key, [])):
                self.fail((name,), key, f"{name}: {key} must be a list of non-empty strings")
        return dict(values)

    def ssh(self, values):
        where = ("ssh",)
        options = self.value(where, values, "options", "ssh", list, default=[])
        if not all(isinstance(o, str) and o for o in options):
            self.fail(where, "options", "ssh: options must be a list of non-empty strings")
        return Ssh(self.value(where, values, "user", "ssh", str),
                   self.value(where, values, "port", "ssh", int, None, 1, 65535),
                   self.value(where, values, "identity", "ssh", str), tuple(options))

    def host(self, where, values, index, counts, ports, job_workdir, ssh, job_worker_cmd):
        """The index-th [[host]]; counts (processes per role so far) numbers its processes."""
        name = values.get("name")
        label = f"host {name!r}" if isinstance(name, str) and name else f"host #{index + 1}"
        self.known_keys(where, values, label, _TABLES["host"])
        if self.value(where, values, "name", label, str) is None:
            self.fail(where, None, f"{label}: name is required")
        if name.startswith("-") or any(c.isspace() for c in name):
            # ssh would read a leading '-' as an option.
            self.fail(where, "name", f"{label}: a name has no spaces and no leading '-'")
        address = self.value(where, values, "address", label, str)
        interface = self.value(where, values, "interface", label, str)
        if address is not None and interface is not None:
            self.fail(where, "interface", f"{label}: give address or interface, not both")
        runs_scheduler = self.value(where, values, "scheduler", label, bool, default=False)
        if runs_scheduler and counts["scheduler"]:
            self.fail(where, "scheduler", f"{label}: a second scheduler (only one host may "
                                          "have scheduler = true)")
        servers = self.value(where, values, "servers", label, int, 0, 0)
        workers = self.value(where, values, "workers", label, int, 0, 0)
        gpu_count = self.value(where, values, "gpu_count", label, int, None, 1)
        gpus = self.gpus(where, values, label, workers, gpu_count)
        worker_cmd = self.command(where, values, "worker_cmd", label, job_worker_cmd)

        processes, owners = [], {}  # owners: port -> the process name listening there
        for role, count_key, k in ([("scheduler", "scheduler", 0)] * runs_scheduler +
                                   [("server", "servers", k) for k in range(servers)] +
                                   [("worker", "workers", k) for k in range(workers)]):
            process_name = role if role == "scheduler" else f"{role}{counts[role]}"
            counts[role] += 1
            port, gpu = ports[role] + k, gpus[k] if role == "worker" and gpus else None
            if port > 65535:
                self.fail(where, count_key, f"{label}: {process_name} would listen at port "
                                            f"{port} (ports.{role} + its index), over 65535")
            if port in owners:
                self.fail(where, count_key, f"{label}: {owners[port]} and {process_name} would "
                                            f"both listen at port {port}; move them apart in "
                                            "[ports]")
            owners[port] = process_name
            processes.append(Process(process_name, role, name, port, gpu,
                                     worker_cmd if role == "worker" else ""))
        advertised = None if interface is not None else (address or name)
        return Host(name, advertised, interface,
                    self.value(where, values, "workdir", label, str, default=job_workdir),
                    self.value(where, values, "ssh_port", label, int, ssh.port, 1, 65535),
                    self.flags(where, values, "worker_flags", label)[0], tuple(processes),
                    self.value(where, values, "data_cache", label, str))

    def gpus(self, where, values, label, workers, gpu_count):
        gpus = self.value(where, values, "gpus", label, list)
        if gpus is None:
            return None
        if len(gpus) != workers:
            self.fail(where, "gpus", f"{label}: gpus lists {len(gpus)} GPUs but workers = "
                                     f"{workers} (one GPU per worker)")
        for gpu in gpus:
            if not isinstance(gpu, int) or isinstance(gpu, bool):
                self.fail(where, "gpus", f"{label}: gpus holds {_describe(gpu)}, not a GPU index")
            if gpu < 0 or (gpu_count is not None and gpu >= gpu_count):
                span = f"in [0, {gpu_count})" if gpu_count is not None else ">= 0"
                self.fail(where, "gpus", f"{label}: GPU index {gpu} out of range (want {span})")
            if gpus.count(gpu) > 1:
                self.fail(where, "gpus", f"{label}: GPU {gpu} is given to two workers")
        return gpus

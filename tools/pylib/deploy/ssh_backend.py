"""tools/launch --backend=ssh: a cluster-file job on real hosts reached over ssh.

1. Ships the release bundle (tools/package) to every host with scp, unless the host already
   holds the same one intact (its MANIFEST.json and every file's sha256, computed there, checked
   here by bundle.check_files), and unpacks it in the host's workdir.
   With a [data] table, every host with workers then stages the data set into its cache
   (staging.py: the bundle's stage_data, the manifest on its stdin), all hosts in parallel; a
   host that fails fails the launch before any process starts, naming the host and the URL.
   Its workers get --data_dir=CACHE/NAME-DIGEST.
   With --auth=curve, sends each host the job's three public keys and the secret keys of the
   roles it runs, no others, as a tar stream through ssh's stdin (never on a command line) into
   WORKDIR/keys/JOB-RUN/ (0700, files 0600).
2. Starts every process as `ssh HOST run_role --watch_stdin ROLE FLAGS`, the scheduler first.
   Each process's output streams back through its ssh into RUN_DIR/NAME.log (workers' progress
   is echoed). The launcher holds each ssh's stdin open: when the launcher stops a process, fails,
   is interrupted or is killed, the ssh ends, run_role sees end of file and stops its process,
   so nothing is left running on any host.
3. Supervises them as the local launcher does (job.supervisor): the scheduler decides the
   job's outcome; a worker or server whose ssh exits non-zero has died (its process exited
   non-zero or by a signal, or the connection to its host dropped: ssh's status 255, and
   ServerAliveInterval notices a silent host within 15 s) and is recorded, the survivors taking
   over a dead worker's data; while --max_restarts allows, its replacement (worker1.r1) starts
   over a new ssh on the same host, a server restoring its shard from the checkpoints in that
   host's run directory (recovery.py). A host that is gone for good fails its replacements in
   turn, each a death, until the restarts run out.
4. Once the scheduler has exited and the others have (or were stopped), fetches each host's run
   directory (stats, metrics, timelines) into RUN_DIR with tar over ssh, removes the keys from
   every host (also after a failure or Ctrl-C; a launcher killed outright leaves them), and
   summarises the run as tools/launch does.

ssh never prompts (BatchMode): keys, known hosts and options come from the cluster file's [ssh]
table. Failures are raised as JobError."""

import json
import os
import shlex
import subprocess
import tarfile
import threading
import time

from ..analysis.cpu_meter import CpuMeter
from ..cluster import bundle as release_bundle
from ..cluster import role_commands
from ..job import keys as job_keys
from ..job.errors import JobError
from ..job.processes import Job
from . import archive
from . import driver
from . import recovery
from . import staging
from .shell import shell_word, variables

# What the check prints between the installed MANIFEST.json and the files' sha256 sums.
_DIGESTS = "--- r2sp sha256 ---"
# Shell variables the remote command sets to expanded paths (a ~ in the workdir becomes $HOME
# there, not here), and the flags use.
_REMOTE_VARIABLES = variables("R2SP_OUT", "R2SP_KEYS", "R2SP_DATA")


def _options(cluster, host, port_flag):
    """What ssh and scp share: the port (`port_flag`: -p or -P), never a prompt, the key and
    the cluster file's -o options."""
    ssh = cluster.ssh
    argv = [port_flag, str(host.ssh_port or ssh.port or 22), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    if ssh.identity:
        argv += ["-i", os.path.expanduser(ssh.identity)]
    for option in ssh.options:
        argv += ["-o", option]
    return argv


def _destination(cluster, host):
    return f"{cluster.ssh.user}@{host.name}" if cluster.ssh.user else host.name


def ssh_argv(cluster, host):
    """The ssh command line that reaches `host` (the remote command follows it)."""
    return (["ssh"] + _options(cluster, host, "-p") +
            ["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", _destination(cluster, host)])


def scp_argv(cluster, host, source, target):
    """scp of the local file `source` to `target` (a path on `host`, unexpanded; scp expands a
    leading ~ itself)."""
    return ["scp", "-q"] + _options(cluster, host, "-P") + [source, f"{_destination(cluster, host)}:{target}"]


class Plan:
    """Every command the ssh backend runs, in order: per host the shipping steps, then the
    processes, then the fetches. `--dry_run` prints it; run() executes it."""

    def __init__(self, cluster, tarball, job_dir, extra_flags, keys=None):
        self.cluster = cluster
        self.tarball = tarball
        self.name, self.manifest = release_bundle.tarball_manifest(tarball)
        self.job_dir = job_dir
        self.extra_flags = extra_flags
        self.keys = keys  # --auth=curve: the local directory of the job's keys; else None

    def remote(self, host, command):
        return ssh_argv(self.cluster, host) + [command]

    def ship(self, host):
        """[(description, argv)]: check, copy, unpack. The copy and unpack run only when the
        check does not show this bundle intact (installed_intact)."""
        bundle = role_commands.bundle_dir(host, self.name)
        work = role_commands.remote_path(host.workdir)
        tar_target = f"{host.workdir.rstrip('/')}/{self.name}.tar.gz"
        return [
            ("check", self.remote(host, (
                f"mkdir -p {work} && cd {role_commands.remote_path(bundle)} 2>/dev/null && "
                f"cat MANIFEST.json && echo {shlex.quote(_DIGESTS)} && "
                "find . -type f ! -name MANIFEST.json -exec sha256sum {} +; true"))),
            ("copy", scp_argv(self.cluster, host, self.tarball, tar_target)),
            ("unpack", self.remote(host, (
                f"cd {work} && rm -rf {shlex.quote(self.name)} && tar xzf {shlex.quote(self.name)}.tar.gz "
                f"&& rm {shlex.quote(self.name)}.tar.gz"))),
        ]

    def stage(self, host):
        """The ssh command that stages the [data] set on `host` (the manifest on its stdin)."""
        bundle = role_commands.bundle_dir(host, self.name)
        return self.remote(host, staging.remote_command(self.cluster.data, host, bundle))

    def key_files(self, host):
        """The key files `host` gets: every public key, the secret keys of its roles."""
        return job_keys.files_for(role_commands.roles_of(host))

    def send_keys(self, host):
        """(tar argv, ssh argv): the tar stream of the host's key files, piped into an ssh that
        unpacks it into the host's keys directory (0700, every file 0600). None without keys."""
        if not self.keys:
            return None
        keys = role_commands.remote_path(role_commands.keys_dir(host, self.job_dir))
        tar = ["tar", "cf", "-", "-C", self.keys] + self.key_files(host)
        # umask 077: the directories (WORKDIR/keys too, if new) and files are the user's only
        # from their creation; tar, run as root, would otherwise keep the files' own modes.
        return tar, self.remote(host, (
            f"umask 077 && rm -rf {keys} && mkdir -p {keys} && chmod 700 {keys} && "
            f"tar xf - --no-same-owner --no-same-permissions -C {keys} && chmod 600 {keys}/*"))

    def remove_keys(self, host):
        """The ssh command that deletes the host's keys directory (None without keys)."""
        if not self.keys:
            return None
        return self.remote(host, "rm -rf " + role_commands.remote_path(
            role_commands.keys_dir(host, self.job_dir)))

    def start(self, host, process):
        """The ssh command that runs `process` on `host` until it exits or the ssh ends."""
        out = role_commands.remote_path(role_commands.run_dir(host, self.job_dir))
        bundle = role_commands.remote_path(role_commands.bundle_dir(host, self.name))
        # The flags name the run directory and the keys through $R2SP_OUT and $R2SP_KEYS, which
        # the remote shell sets to the expanded paths.
        data = self.cluster.data
        args = role_commands.run_role_args(self.cluster, host, process, "$R2SP_OUT",
                                           self.extra_flags, "$R2SP_KEYS" if self.keys else None,
                                           "$R2SP_DATA" if data else None,
                                           recovery.checkpoint_url(self.cluster, self.job_dir))
        quoted = " ".join(shell_word(a, _REMOTE_VARIABLES) for a in args)
        keys = role_commands.remote_path(role_commands.keys_dir(host, self.job_dir))
        set_keys = f"R2SP_KEYS={keys} && " if self.keys else ""
        if data and process.role == "worker":
            set_keys += f"R2SP_DATA={role_commands.remote_path(data.host_dir(host))} && "
        command = (f"mkdir -p {out} && R2SP_OUT={out} && {set_keys}exec "
                   f"{bundle}/{role_commands.RUN_ROLE} --watch_stdin {quoted}")
        return self.remote(host, command)

    def fetch(self, host):
        """The ssh command that writes the host's run directory to stdout as a tar stream."""
        out = role_commands.remote_path(role_commands.run_dir(host, self.job_dir))
        return self.remote(host, f"cd {out} && tar cf - .")

    def describe(self):
        """The plan as shell lines (--dry_run)."""
        lines = [f"# bundle {self.tarball} ({self.name}); run directory on each host: "
                 f"WORKDIR/runs/{self.job_dir}"]
        for host in self.cluster.hosts:
            lines.append(f"# host {host.name}: ship the bundle unless it is there")
            for what, argv in self.ship(host):
                lines.append(shlex.join(argv) + f"   # {what}")
        for host in staging.hosts(self.cluster):
            lines.append(f"# host {host.name}: stage the data set {self.cluster.data.name}")
            lines.append(shlex.join(self.stage(host)) + " < " + self.cluster.data.manifest_path)
        if self.keys:
            lines.append(f"# --auth=curve: each host gets the public keys and its roles' secret "
                         f"keys from {self.keys}")
            for host in self.cluster.hosts:
                tar, ssh = self.send_keys(host)
                lines.append(shlex.join(tar) + " | " + shlex.join(ssh) + "   # keys")
        for _, host, process in role_commands.scheduler_first(self.cluster):
            lines.append(f"# {process.name} on {host.name}")
            lines.append(shlex.join(self.start(host, process)) + " < (held open) > " + process.name + ".log")
        for host in self.cluster.hosts:
            lines.append(shlex.join(self.fetch(host)) + " | tar xf - -C RUN_DIR")
        if self.keys:
            lines.append("# always, also after a failure or Ctrl-C:")
            for host in self.cluster.hosts:
                lines.append(shlex.join(self.remove_keys(host)) + "   # remove the keys")
        return "\n".join(lines)


def installed_intact(check_output, manifest_text):
    """Whether the check's output (Plan.ship) shows the bundle `manifest_text` installed and
    intact: its MANIFEST.json the same, every file's sha256 as the manifest says."""
    installed, marker, sums = check_output.partition(_DIGESTS + "\n")
    if not marker or not release_bundle.same_manifest(installed, manifest_text):
        return False
    digests = {}
    for line in sums.splitlines():
        digest, _, path = line.partition("  ")
        digests[path.removeprefix("./")] = digest
    return not release_bundle.check_files(json.loads(manifest_text), digests)


def _check(argv, what):
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise JobError(f"{what} failed ({r.returncode}): {(r.stderr or r.stdout).strip()}")
    return r.stdout


def ship_bundle(plan, host):
    """Makes sure `host` holds the plan's bundle; returns True if it had to copy it."""
    check, copy, unpack = plan.ship(host)
    if installed_intact(_check(check[1], f"ssh to {host.name}"), plan.manifest):
        return False
    _check(copy[1], f"copying the bundle to {host.name}")
    _check(unpack[1], f"unpacking the bundle on {host.name}")
    return True


def stage_data(plan, host):
    """Stages the [data] set on `host`; returns stage_data's line. JobError naming the host
    (and stage_data's message, the URL) when it fails."""
    r = subprocess.run(plan.stage(host), input=plan.cluster.data.manifest_text,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise JobError(staging.failure(host, plan.cluster.data, r.stderr or r.stdout))
    return r.stdout.strip()


def send_keys(plan, host):
    """Puts the host's key files into its keys directory (Plan.send_keys)."""
    tar_argv, ssh = plan.send_keys(host)
    with subprocess.Popen(tar_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL) as tar:
        r = subprocess.run(ssh, stdin=tar.stdout, capture_output=True, text=True)
        tar.stdout.close()
        tar_error = tar.stderr.read().decode(errors="replace").strip()
        tar.wait()
    if tar.returncode != 0:
        raise JobError(f"reading the keys in {plan.keys} failed: {tar_error}")
    if r.returncode != 0:
        raise JobError(f"copying the keys to {host.name} failed ({r.returncode}): "
                                f"{(r.stderr or r.stdout).strip()}")


def remove_keys(plan, host):
    """Deletes the host's keys directory; says so when it cannot (never raises)."""
    r = subprocess.run(plan.remove_keys(host), capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        where = role_commands.keys_dir(host, plan.job_dir)
        print(f"launch: removing the keys from {host.name} failed ({r.returncode}): "
              f"{(r.stderr or r.stdout).strip()}; delete {where} there yourself", flush=True)


def in_parallel(function, items):
    """function(item) for every item, each in its own thread; raises the first error."""
    errors = []

    def call(item):
        try:
            function(item)
        except Exception as e:  # noqa: BLE001 - passed on below
            errors.append(e)

    threads = [threading.Thread(target=call, args=(item,), daemon=True) for item in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def fetch_results(plan, host, run_dir):
    """Unpacks the host's run directory into `run_dir` (archive.safe_extract: the host may not
    write outside it). Best effort: a host that died has nothing to give, and the job's own
    error says why; an unsafe archive is said and dropped."""
    with subprocess.Popen(plan.fetch(host), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          stdin=subprocess.DEVNULL) as ssh:
        try:
            with tarfile.open(fileobj=ssh.stdout, mode="r|") as stream:
                archive.safe_extract(stream, run_dir, stream=True)
        except archive.UnsafeArchive as e:
            print(f"launch: the results of {host.name} were not taken: {e}", flush=True)
        except (tarfile.TarError, OSError):
            pass
        ssh.stdout.close()
        ssh.wait()


class SshBackend(driver.Backend):
    """deploy.driver's hooks over ssh: ship and start in launch, the local launcher's
    supervision (job.supervisor, replacements started over ssh) in poll, fetch in collect, the
    keys removed in clean_up."""

    poll_seconds = 0.1
    resumable = True

    def __init__(self, run):
        super().__init__(run)
        flags = recovery.with_recovery(run.extra_flags, recovery.role_flags(
            run.args, run.cluster, "$R2SP_OUT", run.job_dir))
        self.plan = Plan(run.cluster, run.tarball, run.job_dir, flags, run.keys)
        self.job = None
        self.hosts = {}  # replacement name -> the index of the host it runs on
        self.moved = {}  # host index -> servers' replacements moved there (recovery.elsewhere)

    def describe(self):
        return self.plan.describe()

    def launch(self):
        cluster, plan, args = self.run.cluster, self.plan, self.run.args
        copied = []
        in_parallel(lambda h: ship_bundle(plan, h) and copied.append(h.name), cluster.hosts)
        print(f"launch: bundle {plan.name} on {len(cluster.hosts)} hosts "
              f"(copied to {len(copied)}: {', '.join(sorted(copied)) or 'none'})", flush=True)
        in_parallel(lambda h: print("launch: " + stage_data(plan, h), flush=True),
                    staging.hosts(cluster))
        self.job = Job(args, hold_stdin=True)
        if plan.keys:
            in_parallel(lambda h: send_keys(plan, h), cluster.hosts)
        for _, host, process in role_commands.scheduler_first(cluster):
            self.job.start(process.name, plan.start(host, process), echo=process.role == "worker")
        print(f"launch: {cluster.num_servers} servers, {cluster.num_workers} workers, sync={cluster.mode} "
              f"on {len(cluster.hosts)} hosts over ssh; logs in {args.run_dir}", flush=True)
        self.cpu = CpuMeter()
        self.started = time.time()

    def poll(self):
        """Supervises the job until the scheduler has exited (job.supervisor.Supervisor: a dead
        worker or server is recorded, and replaced on its host while --max_restarts allows);
        True once it completed, JobError when the scheduler failed."""
        self.outcome = recovery.supervise(self.run.args, self.job, self.started, self.cpu,
                                          self.restart)
        return True

    def restart(self, dead, new):
        """Starts `new`, the replacement of the process `dead`, over a new ssh to its host."""
        cluster = self.run.cluster
        index, host, process = recovery.placement(cluster, new)
        if process.role == "server" and cluster.checkpoint_url:
            index, host, process = recovery.elsewhere(cluster, self.hosts.get(dead, index),
                                                      process, self.moved)
            print(f"launch: {new} runs on {host.name}, restoring from {cluster.checkpoint_url}",
                  flush=True)
        self.hosts[new] = index
        _, echo = self.job.command(dead)
        self.job.start(new, self.plan.start(host, process), echo)

    def stop(self):
        if self.job:
            self.job.stop_all()

    def clean_up(self):
        if self.plan.keys:
            in_parallel(lambda h: remove_keys(self.plan, h), self.run.cluster.hosts)
        return []

    def collect(self):
        in_parallel(lambda h: fetch_results(self.plan, h, self.run.args.run_dir),
                    self.run.cluster.hosts)


def run(args, cluster, tarball):
    """Runs the job over ssh (deploy.driver with SshBackend); returns its summary."""
    return driver.run(args, cluster, tarball, SshBackend)

"""tools/launch --backend=ssh: a cluster-file job on real hosts reached over ssh.

1. Ships the release bundle (tools/package) to every host with scp, unless the host already
   holds the same one (its MANIFEST.json is compared), and unpacks it in the host's workdir.
   With --auth=curve, sends each host the job's three public keys and the secret keys of the
   roles it runs, no others, as a tar stream through ssh's stdin (never on a command line) into
   WORKDIR/keys/JOB-RUN/ (0700, files 0600).
2. Starts every process as `ssh HOST run_role --watch_stdin ROLE FLAGS`, the scheduler first.
   Each process's output streams back through its ssh into RUN_DIR/NAME.log (workers' progress
   is echoed). The launcher holds each ssh's stdin open: when the launcher stops a process, fails,
   is interrupted or is killed, the ssh ends, run_role sees end of file and stops its process,
   so nothing is left running on any host.
3. Once every process has exited with status 0 (or any failed), fetches each host's run
   directory (stats, metrics, timelines) into RUN_DIR with tar over ssh, removes the keys from
   every host (also after a failure or Ctrl-C; a launcher killed outright leaves them), and
   summarises the run as tools/launch does.

ssh never prompts (BatchMode): keys, known hosts and options come from the cluster file's [ssh]
table. Failures are raised as launcher.JobError."""

import os
import shlex
import subprocess
import threading
import time

from ..job import keys as job_keys
from ..job import launcher
from ..cluster import bundle as release_bundle
from ..cluster import role_commands
from ..analysis.cpu_meter import CpuMeter

# Shell variables the remote command sets to expanded paths (a ~ in the workdir becomes $HOME
# there, not here), and the flags use.
_REMOTE_VARIABLES = ("$R2SP_OUT", "$R2SP_KEYS")


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
        check does not print this bundle's manifest."""
        bundle = role_commands.bundle_dir(host, self.name)
        work = role_commands.remote_path(host.workdir)
        tar_target = f"{host.workdir.rstrip('/')}/{self.name}.tar.gz"
        return [
            ("check", self.remote(host, f"mkdir -p {work} && cat {role_commands.remote_path(bundle)}/MANIFEST.json 2>/dev/null; true")),
            ("copy", scp_argv(self.cluster, host, self.tarball, tar_target)),
            ("unpack", self.remote(host, (
                f"cd {work} && rm -rf {shlex.quote(self.name)} && tar xzf {shlex.quote(self.name)}.tar.gz "
                f"&& rm {shlex.quote(self.name)}.tar.gz"))),
        ]

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
        args = role_commands.run_role_args(self.cluster, host, process, "$R2SP_OUT",
                                           self.extra_flags, "$R2SP_KEYS" if self.keys else None)
        quoted = " ".join(_remote_word(a) for a in args)
        keys = role_commands.remote_path(role_commands.keys_dir(host, self.job_dir))
        set_keys = f"R2SP_KEYS={keys} && " if self.keys else ""
        command = (f"mkdir -p {out} && R2SP_OUT={out} && {set_keys}exec "
                   f"{bundle}/{role_commands.RUN_ROLE} --watch_stdin {quoted}")
        return self.remote(host, command)

    def fetch(self, host):
        """The ssh command that writes the host's run directory to stdout as a tar stream."""
        out = role_commands.remote_path(role_commands.run_dir(host, self.job_dir))
        return self.remote(host, f"cd {out} && tar cf - .")

    def hosts_and_processes(self):
        return [(h, p) for h in self.cluster.hosts for p in h.processes]

    def describe(self):
        """The plan as shell lines (--dry_run)."""
        lines = [f"# bundle {self.tarball} ({self.name}); run directory on each host: "
                 f"WORKDIR/runs/{self.job_dir}"]
        for host in self.cluster.hosts:
            lines.append(f"# host {host.name}: ship the bundle unless it is there")
            for what, argv in self.ship(host):
                lines.append(shlex.join(argv) + f"   # {what}")
        if self.keys:
            lines.append(f"# --auth=curve: each host gets the public keys and its roles' secret "
                         f"keys from {self.keys}")
            for host in self.cluster.hosts:
                tar, ssh = self.send_keys(host)
                lines.append(shlex.join(tar) + " | " + shlex.join(ssh) + "   # keys")
        order = sorted(self.hosts_and_processes(), key=lambda hp: hp[1].role != "scheduler")
        for host, process in order:
            lines.append(f"# {process.name} on {host.name}")
            lines.append(shlex.join(self.start(host, process)) + " < (held open) > " + process.name + ".log")
        for host in self.cluster.hosts:
            lines.append(shlex.join(self.fetch(host)) + " | tar xf - -C RUN_DIR")
        if self.keys:
            lines.append("# always, also after a failure or Ctrl-C:")
            for host in self.cluster.hosts:
                lines.append(shlex.join(self.remove_keys(host)) + "   # remove the keys")
        return "\n".join(lines)


def _remote_word(arg):
    """`arg` quoted for the remote shell, the _REMOTE_VARIABLES in it left to expand."""
    for variable in _REMOTE_VARIABLES:
        if variable in arg:
            return arg.replace(variable, f'"{variable}"')
    return shlex.quote(arg)


def _check(argv, what):
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise launcher.JobError(f"{what} failed ({r.returncode}): {(r.stderr or r.stdout).strip()}")
    return r.stdout


def ship_bundle(plan, host):
    """Makes sure `host` holds the plan's bundle; returns True if it had to copy it."""
    check, copy, unpack = plan.ship(host)
    if _check(check[1], f"ssh to {host.name}").strip() == plan.manifest.strip():
        return False
    _check(copy[1], f"copying the bundle to {host.name}")
    _check(unpack[1], f"unpacking the bundle on {host.name}")
    return True


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
        raise launcher.JobError(f"reading the keys in {plan.keys} failed: {tar_error}")
    if r.returncode != 0:
        raise launcher.JobError(f"copying the keys to {host.name} failed ({r.returncode}): "
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
    """Unpacks the host's run directory into `run_dir` (best effort: a host that died has
    nothing to give, and the job's own error says why)."""
    with subprocess.Popen(plan.fetch(host), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          stdin=subprocess.DEVNULL) as ssh:
        subprocess.run(["tar", "xf", "-", "-C", run_dir], stdin=ssh.stdout, stderr=subprocess.DEVNULL)
        ssh.wait()


def run(args, cluster, tarball):
    """Runs the job over ssh; returns its summary (also RUN_DIR/summary.json). JobError when it
    fails; every process is stopped first, whatever the exception."""
    if args.dry_run:  # before the run directory exists: a dry run touches nothing
        keys = job_keys.keys_dir(args) if job_keys.curve(args) else None
        print(Plan(cluster, tarball, role_commands.job_dir(cluster, args.run_dir),
                   role_commands.extra_flags_from(args), keys).describe())
        return None
    _, stats_file = launcher.prepare_run_dir(args)
    plan = Plan(cluster, tarball, role_commands.job_dir(cluster, args.run_dir),
                role_commands.extra_flags_from(args), job_keys.prepare(args))
    start = time.time()
    copied = []
    in_parallel(lambda h: ship_bundle(plan, h) and copied.append(h.name), cluster.hosts)
    print(f"launch: bundle {plan.name} on {len(cluster.hosts)} hosts "
          f"(copied to {len(copied)}: {', '.join(sorted(copied)) or 'none'})", flush=True)
    job = launcher.Job(args, hold_stdin=True)
    order = sorted(plan.hosts_and_processes(), key=lambda hp: hp[1].role != "scheduler")
    failure = None
    try:
        if plan.keys:
            in_parallel(lambda h: send_keys(plan, h), cluster.hosts)
        for host, process in order:
            job.start(process.name, plan.start(host, process), echo=process.role == "worker")
        print(f"launch: {cluster.num_servers} servers, {cluster.num_workers} workers, sync={cluster.mode} "
              f"on {len(cluster.hosts)} hosts over ssh; logs in {args.run_dir}", flush=True)
        launcher.supervise(job, CpuMeter(), start)
    except BaseException as e:
        job.stop_all()
        failure = e
    wall = time.time() - start
    in_parallel(lambda h: fetch_results(plan, h, args.run_dir), cluster.hosts)
    if plan.keys:
        in_parallel(lambda h: remove_keys(plan, h), cluster.hosts)
    if failure:
        raise failure
    return launcher.finish_job(args, wall, {}, stats_file)

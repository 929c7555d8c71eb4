"""tools/launch --backend=ec2: a cluster-file job on EC2 instances, one per [[host]], through the
AWS CLI (`aws`, v1 or v2, with the caller's credentials and region).

1. Finds the subnet's VPC and creates a security group r2sp-JOB-RUN there that lets the job's
   instances reach each other's job ports (the scheduler's, each host's server and worker
   ranges) and nothing else: the rule names the group itself as the only source. With
   placement, creates the placement group r2sp-JOB-RUN. Uploads the release bundle
   (tools/package) to bundle_url.
2. Starts the scheduler's host, then the others, each with run-instances and its own user-data
   (ec2_user_data.py): the scheduler's private address, in run-instances' answer, is where the
   other hosts find it. Instances are tagged r2sp-job=JOB, r2sp-run=RUN, Name=JOB-HOST, and
   power off into termination when their user-data ends.
3. Supervises the job as the local launcher does (job.supervisor through ec2_supervision: the
   hosts' exit records and markers in results_url and the instances' states, every 5 s): a
   process that dies, or goes with its reclaimed or lost instance, is recorded and the job goes
   on; while --max_restarts allows, a replacement instance of its host entry starts the lost
   processes, which join the running job (a server restores from the checkpoint_url, which a
   server's replacement needs). Once the scheduler has exited, waits for every live host's
   results (its done marker). HOST.failed (a host that could not start) fails the job.
4. Always, also on failure and Ctrl-C: terminates every instance it started (and any other
   tagged with this run), waits until they are gone, deletes the security group, the
   placement group, the bundle it uploaded for the run (not a bundle_url the cluster file
   gives) and, with --auth=curve, the hosts' key files next to the results, which the hosts
   fetched at boot.
   Then copies each host's results into RUN_DIR and summarises the run as tools/launch does.

With spot (and on_demand_fallback), a host whose spot request finds no capacity starts on demand.
The [ec2] table's keys: ec2_plan.py. The environment's R2SP_AWS_ENDPOINT_URL, if set, is passed
to every aws command as --endpoint-url (tests). Failures are raised as JobError. The run's
skeleton (run directory, keys, timeout, cleanup, summary) is deploy.driver's; Ec2Backend supplies
its hooks."""

import dataclasses
import json
import os
import subprocess
import sys
import time

from ..analysis.cpu_meter import CpuMeter
from ..cluster import results as result_store
from ..job.errors import JobError
from ..job import supervisor
from . import driver
from . import ec2_supervision
from . import ec2_user_data
from . import recovery
from .ec2_plan import POLL_SECONDS, Plan, options_of

# How long the hosts may take to upload their results after the job (their processes have
# exited by then).
RESULTS_SECONDS = 120
# How long the scheduler waits for a lost server's replacement (--server_replace_s): a new
# instance boots, installs and fetches the bundle and the checkpoints first (locally: 60 s).
SERVER_REPLACE_SECONDS = 600
NO_SPOT_CAPACITY = "InsufficientInstanceCapacity"


class Aws:
    """Runs the plan's commands; JobError with the CLI's message when one fails."""

    def _run(self, argv, what):
        # AWS_PAGER="": CLI v2 would otherwise pipe its output through a pager.
        r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           env=dict(os.environ, AWS_PAGER=""))
        if r.returncode != 0:
            raise JobError(f"{what} failed ({r.returncode}): {(r.stderr or r.stdout).strip()}")
        return r.stdout

    def json(self, argv, what):
        out = self._run(argv, what)
        try:
            return json.loads(out) if out.strip() else {}
        except ValueError:
            raise JobError(f"{what}: the AWS CLI printed no JSON: {out[:200]!r}")

    def command(self, argv, what):
        self._run(argv, what)


@dataclasses.dataclass
class Started:
    """What the launch created and the cleanup must remove."""
    group_id: str | None = None
    placement_group: str | None = None
    bundle_uploaded: bool = False
    instances: dict = dataclasses.field(default_factory=dict)  # host (or b.r1) -> instance id
    scheduler_ip: str | None = None
    root_device: str | None = None


def launch(plan, aws, started, work_dir):
    """Creates the security group, uploads the bundle and starts every host's instance."""
    subnets = aws.json(plan.describe_subnet(), "describe-subnets")["Subnets"]
    vpc_id = subnets[0]["VpcId"]
    started.group_id = aws.json(plan.create_security_group(vpc_id), "create-security-group")["GroupId"]
    aws.command(plan.authorize_ingress(started.group_id), "authorize-security-group-ingress")
    if plan.placement_group:
        aws.command(plan.create_placement_group(), "create-placement-group")
        started.placement_group = plan.placement_group
    upload = plan.upload_bundle()
    if upload:
        started.bundle_uploaded = True  # a failed upload may leave part of it
        aws.command(upload, f"uploading the bundle to {plan.bundle_url}")
    for host in plan.ordered_hosts():
        for argv in plan.upload_keys(host):
            aws.command(argv, f"uploading {host.name}'s keys to {plan.keys_url}/{host.name}/")
    if plan.options.root_volume_gb:
        started.root_device = aws.json(plan.describe_image(), "describe-images")["Images"][0]["RootDeviceName"]
    for host in plan.ordered_hosts():
        start_instance(plan, aws, started, work_dir, host)
    aws.command(plan.wait("running", list(started.instances.values())), "waiting for the instances")


def start_instance(plan, aws, started, work_dir, host, key=None, replacing=None):
    """Starts the instance of `host` (a replacement's: `key`, b.r1, running only `replacing`,
    {process: replacement name}); spot as the [ec2] table says, on demand when spot capacity is
    short and on_demand_fallback allows. Returns its id; JobError when run-instances fails."""
    key = key or host.name

    def run(spot):
        path = os.path.join(work_dir, f"user_data_{key}.sh")
        with open(path, "w") as f:
            f.write(plan.user_data(host, started.scheduler_ip, key, replacing, spot))
        return aws.json(plan.run_instance(host, started.group_id, path, started.root_device, key,
                                          spot), f"run-instances for {key}")["Instances"][0]

    try:
        instance = run(plan.options.spot)
    except JobError as e:
        if not (plan.options.spot and plan.options.on_demand_fallback and NO_SPOT_CAPACITY in str(e)):
            raise
        print(f"launch: no spot capacity for {key}; starting it on demand (on_demand_fallback)",
              flush=True)
        instance = run(False)
    started.instances[key] = instance["InstanceId"]
    started.scheduler_ip = started.scheduler_ip or instance["PrivateIpAddress"]
    print(f"launch: {key} is {instance['InstanceId']} ({instance.get('PrivateIpAddress')})",
          flush=True)
    return instance["InstanceId"]


def clean_up(plan, aws, started):
    """Terminates every instance of the run, waits for them to go, deletes the security group.
    Returns the problems (each a sentence naming what may be left)."""
    problems = []
    ids = set(started.instances.values())
    try:  # an instance whose run-instances was interrupted is known only by its tags
        found = aws.json(plan.describe_instances(), "describe-instances")["Reservations"]
        ids |= {i["InstanceId"] for r in found for i in r["Instances"]}
    except JobError as e:
        problems.append(str(e))
    if ids:
        try:
            aws.command(plan.terminate(sorted(ids)), "terminate-instances")
            aws.command(plan.wait("terminated", sorted(ids)), "waiting for termination")
            print(f"launch: terminated {', '.join(sorted(ids))}", flush=True)
        except JobError as e:
            problems.append(f"{e}; check instances {', '.join(sorted(ids))}")
    if plan.keys:
        try:
            aws.command(plan.delete_keys(), "deleting the keys")
        except JobError as e:
            problems.append(f"{e}; delete {plan.keys_url}/ yourself")
    if started.group_id:  # the instances' network interfaces linger a little: retried
        retrying(aws, plan.delete_security_group(started.group_id), "delete-security-group",
                 f"delete security group {started.group_id} yourself", problems)
    if started.placement_group:
        retrying(aws, plan.delete_placement_group(), "delete-placement-group",
                 f"delete placement group {started.placement_group} yourself", problems)
    delete_bundle = plan.delete_bundle() if started.bundle_uploaded else None
    if delete_bundle:
        try:
            aws.command(delete_bundle, "deleting the bundle")
        except JobError as e:
            problems.append(f"{e}; delete {plan.bundle_url} yourself")
    return problems


def retrying(aws, argv, what, advice, problems, attempts=12):
    """Runs `argv` until it succeeds, `attempts` times at most, 5 s apart; else adds the last
    error and `advice` to `problems`."""
    for attempt in range(attempts):
        try:
            aws.command(argv, what)
            return
        except JobError as e:
            if attempt == attempts - 1:
                problems.append(f"{e}; {advice}")
            else:
                time.sleep(5)


class Ec2Backend(driver.Backend):
    """deploy.driver's hooks for EC2: the instances launched in launch, the job supervised
    (ec2_supervision) in poll, the hosts' results awaited in finish, every instance terminated
    and the run's objects deleted in clean_up, the hosts' results copied in collect."""

    poll_seconds = POLL_SECONDS
    resumable = True

    def __init__(self, run):
        super().__init__(run)
        args, cluster = run.args, run.cluster
        flags = recovery.role_flags(args, cluster, ec2_user_data.OUT, run.job_dir)
        flags["scheduler"] = [f"--server_replace_s={SERVER_REPLACE_SECONDS}"
                              if f.startswith("--server_replace_s=") else f for f in flags["scheduler"]]
        extra = recovery.with_recovery(run.extra_flags, flags)
        if not any(f.startswith("--register_timeout_s") for f in cluster.flags["scheduler"] + extra["scheduler"]):
            # Hosts boot and install at different speeds: give the slowest time to register.
            extra["scheduler"] = ["--register_timeout_s=900"] + extra["scheduler"]
        self.plan = Plan(cluster, options_of(cluster), run.tarball, run_id(args), extra,
                         args.timeout, os.environ.get("R2SP_AWS_ENDPOINT_URL"), run.keys,
                         recovery.checkpoint_url(cluster, run.job_dir))
        self.aws, self.started = Aws(), Started()
        self.store = self.processes = None  # made by prepare and launch: a dry run needs none
        if supervisor.parse_max_restarts(args.max_restarts or "0")["server"] and \
                not cluster.checkpoint_url:
            raise JobError("--max_restarts=server:N on EC2 needs the cluster file's "
                           "checkpoint_url ([job]): a server's replacement runs on a new "
                           "instance and restores its shard from there")

    def describe(self):
        return self.plan.describe()

    def prepare(self):
        self.store = ec2_store(self.plan)
        self.work_dir = os.path.join(self.run.run_dir, "ec2")
        os.makedirs(self.work_dir, exist_ok=True)

    def launch(self):
        cluster = self.run.cluster
        self.processes = ec2_supervision.Ec2Processes(
            self.run.args, self.plan, self.aws, self.store, self.started,
            lambda key, host, replacing: start_instance(self.plan, self.aws, self.started,
                                                        self.work_dir, host, key, replacing))
        launch(self.plan, self.aws, self.started, self.work_dir)
        print(f"launch: {cluster.num_servers} servers, {cluster.num_workers} workers, "
              f"sync={cluster.mode} on {len(cluster.hosts)} EC2 instances; results in "
              f"{self.plan.results}", flush=True)
        self.launched = time.time()

    def poll(self):
        """Supervises the job until the scheduler has exited (ec2_supervision); True once it
        completed, JobError when the scheduler failed or a host could not start."""
        self.outcome = recovery.supervise(self.run.args, self.processes, self.launched,
                                          CpuMeter(), self.processes.restart)
        return True

    def finish(self):
        missing = ec2_supervision.wait_for_results(self.store, self.started,
                                                   self.processes.gone, RESULTS_SECONDS)
        if missing:
            print(f"launch: no results from {', '.join(missing)} after {RESULTS_SECONDS} s",
                  flush=True)

    def clean_up(self):
        return clean_up(self.plan, self.aws, self.started)

    def collect(self):
        for host in self.started.instances if self.store else ():
            try:
                self.store.collect(host, self.run.run_dir)
            except (OSError, result_store.StoreError) as e:
                print(f"launch: no results from {host}: {e}", file=sys.stderr)


def run_id(args):
    """The run's id (its results' and tags' name): the run directory's name (TIMESTAMP in a
    dry run), with -aK for attempt K of a resumed run (the attempts' results apart; their
    checkpoint_url is the run's)."""
    name = os.path.basename(os.path.normpath(args.run_dir)) if args.run_dir else "TIMESTAMP"
    attempt = getattr(args, "attempt", 1) or 1
    return name if attempt == 1 else f"{name}-a{attempt}"


def run(args, cluster, tarball):
    """Runs the job on EC2 (deploy.driver with Ec2Backend); returns its summary."""
    return driver.run(args, cluster, tarball, Ec2Backend)


def ec2_store(plan):
    common = plan.aws()[1:]  # --output json, --region, --endpoint-url
    return result_store.open_store(plan.results, common)

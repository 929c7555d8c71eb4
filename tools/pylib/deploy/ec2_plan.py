"""The EC2 backend's commands (ec2_backend.py runs them): the [ec2] table of the cluster file
as Ec2Options, and a Plan that builds every aws command line of a job, given the ids AWS returns
or, for --dry_run, placeholders. Pure: nothing here runs a command.

[ec2] keys (cluster_file.BACKEND_TABLES): ami, subnet and results_url are required;
instance_type (default g5.xlarge), region (default: the CLI's), key_name, instance_profile
(needed for s3:// URLs: the instances read and write S3 with it), spot (default false:
on-demand), root_volume_gb, placement ("cluster", "spread" or "partition": a placement group
r2sp-JOB-RUN of that strategy, made for the run and deleted after it; "cluster" packs the
instances close together for the lowest latency and the most bandwidth between them, what p4d
and p5 jobs want), bundle_url (default RESULTS_URL/JOB/RUN/BUNDLE.tar.gz, uploaded for the run
and deleted after it; a URL ending in / gets the tarball's name, and a bundle_url given is kept),
on_demand_fallback (default false; with spot: when run-instances finds no spot capacity,
InsufficientInstanceCapacity, the host, or its replacement, starts on demand instead).
URLs are s3://, file:// (tests) or, for an already uploaded bundle, https://.

With --auth=curve each host's key files (the public keys, the secret keys of its roles) go to
RESULTS_URL/JOB/RUN.keys/HOST/ beside the run's results (not under them: they are never
collected), whence the host's user-data fetches them; the cleanup deletes them. The user-data
itself names only that URL."""

import dataclasses
import json
import math
import os
import shlex

from . import ec2_user_data
from ..job import keys as job_keys
from ..cluster import bundle as release_bundle
from ..cluster import role_commands
from ..job.errors import JobError

REQUIRED = ("ami", "subnet", "results_url")
PLACEMENT_STRATEGIES = ("cluster", "spread", "partition")
POLL_SECONDS = 5
# Time for an instance to boot, install the AWS CLI and fetch the bundle, beyond --timeout.
BOOT_MINUTES = 20
# Placeholders --dry_run prints for what only AWS can tell.
SG_ID, SCHEDULER_IP, VPC_ID, ROOT_DEVICE = "SG_ID", "SCHEDULER_IP", "VPC_ID", "ROOT_DEVICE"


@dataclasses.dataclass(frozen=True)
class Ec2Options:
    ami: str
    subnet: str
    results_url: str
    instance_type: str = "g5.xlarge"
    region: str | None = None
    key_name: str | None = None
    instance_profile: str | None = None
    spot: bool = False
    root_volume_gb: int | None = None
    bundle_url: str | None = None
    placement: str | None = None  # a placement group's strategy (PLACEMENT_STRATEGIES)
    ssh_cidr: str | None = None  # opens port 22 to this CIDR
    on_demand_fallback: bool = False  # no spot capacity: start on demand instead


def options_of(cluster):
    """The cluster file's [ec2] table as Ec2Options; JobError if a required key is missing."""
    values = {k: v for k, v in cluster.backend_options.get("ec2", {}).items() if v is not None}
    missing = [k for k in REQUIRED if k not in values]
    if missing:
        raise JobError(f"{cluster.path}: --backend=ec2 needs {', '.join(missing)} in "
                                "the [ec2] table")
    for key in ("results_url", "bundle_url"):
        url = values.get(key)
        schemes = ("s3://", "file://") + (("https://",) if key == "bundle_url" else ())
        if url and not url.startswith(schemes):
            raise JobError(f"{cluster.path}: [ec2] {key} must be an s3:// or file:// URL"
                                    + (" (or https:// for an uploaded bundle)" if key == "bundle_url" else ""))
    if values.get("placement", PLACEMENT_STRATEGIES[0]) not in PLACEMENT_STRATEGIES:
        raise JobError(f"{cluster.path}: [ec2] placement must be one of "
                                f"{', '.join(PLACEMENT_STRATEGIES)}, not {values['placement']!r}")
    return Ec2Options(**values)


def job_port_ranges(cluster):
    """[(first, last)] TCP ports the job's processes listen on, merged, in order."""
    ranges = sorted((p.port, p.port) for p in cluster.processes())
    merged = []
    for first, last in ranges:
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(last, merged[-1][1]))
        else:
            merged.append((first, last))
    return merged


class Plan:
    """Every aws command of the job, as argv lists, with the ids AWS gives passed in (or the
    placeholders above for --dry_run); describe() prints them all."""

    def __init__(self, cluster, options, tarball, run_id, extra_flags, timeout, endpoint_url=None,
                 keys=None, checkpoint_url=None):
        self.cluster, self.options, self.tarball = cluster, options, tarball
        self.keys = keys  # --auth=curve: the local directory of the job's keys; else None
        self.bundle_name, _ = release_bundle.tarball_manifest(tarball)
        self.run_id = run_id
        self.extra_flags = extra_flags
        self.timeout = timeout
        self.endpoint_url = endpoint_url
        self.results = f"{options.results_url.rstrip('/')}/{cluster.job_name}/{run_id}"
        self.keys_url = self.results + ".keys"
        bundle_url = options.bundle_url or self.results + "/"
        if bundle_url.endswith("/"):
            bundle_url += os.path.basename(tarball)
        self.bundle_url = bundle_url
        # The bundle uploaded for this run only goes with it; one the user placed stays.
        self.bundle_is_the_runs = options.bundle_url is None
        self.group_name = f"r2sp-{cluster.job_name}-{run_id}"
        self.placement_group = self.group_name if options.placement else None
        self.tags = {"r2sp-job": cluster.job_name, "r2sp-run": run_id}
        # The run's checkpoint_url (recovery.checkpoint_url: servers copy their checkpoints
        # there, a replacement or a resumed run's servers restore from it), or None.
        self.checkpoint_url = checkpoint_url

    def aws(self, *argv):
        common = ["--output", "json"]
        if self.options.region:
            common += ["--region", self.options.region]
        if self.endpoint_url:
            common += ["--endpoint-url", self.endpoint_url]
        return ["aws", *argv, *common]

    def tag_specification(self, resource_types, name=None):
        tags = [{"Key": k, "Value": v} for k, v in self.tags.items()]
        if name:
            tags.append({"Key": "Name", "Value": name})
        return json.dumps([{"ResourceType": t, "Tags": tags} for t in resource_types])

    def describe_subnet(self):
        return self.aws("ec2", "describe-subnets", "--subnet-ids", self.options.subnet)

    def create_security_group(self, vpc_id):
        return self.aws("ec2", "create-security-group", "--group-name", self.group_name,
                        "--description", f"R2SP job {self.cluster.job_name} run {self.run_id}: "
                                         "its instances only", "--vpc-id", vpc_id,
                        "--tag-specifications", self.tag_specification(["security-group"]))

    def authorize_ingress(self, group_id):
        """Only the group's own members reach the job's ports (and ssh only if asked)."""
        permissions = [{"IpProtocol": "tcp", "FromPort": first, "ToPort": last,
                        "UserIdGroupPairs": [{"GroupId": group_id}]}
                       for first, last in job_port_ranges(self.cluster)]
        if self.options.ssh_cidr:
            permissions.append({"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                                "IpRanges": [{"CidrIp": self.options.ssh_cidr}]})
        return self.aws("ec2", "authorize-security-group-ingress", "--group-id", group_id,
                        "--ip-permissions", json.dumps(permissions))

    def upload_bundle(self):
        """The command that puts the tarball at bundle_url; None for https:// (uploaded)."""
        if self.bundle_url.startswith("s3://"):
            return self.aws("s3", "cp", "--only-show-errors", self.tarball, self.bundle_url)
        if self.bundle_url.startswith("file://"):
            return ["install", "-D", "-m", "644", self.tarball, self.bundle_url[len("file://"):]]
        return None

    def delete_bundle(self):
        """The command that deletes the bundle this run uploaded (None: none, or the user's)."""
        if not self.bundle_is_the_runs or self.upload_bundle() is None:
            return None
        if self.bundle_url.startswith("s3://"):
            return self.aws("s3", "rm", "--only-show-errors", self.bundle_url)
        return ["rm", "-f", self.bundle_url[len("file://"):]]

    def create_placement_group(self):
        return self.aws("ec2", "create-placement-group", "--group-name", self.placement_group,
                        "--strategy", self.options.placement,
                        "--tag-specifications", self.tag_specification(["placement-group"]))

    def delete_placement_group(self):
        return self.aws("ec2", "delete-placement-group", "--group-name", self.placement_group)

    def key_files(self, host):
        return job_keys.files_for(role_commands.roles_of(host))

    def upload_keys(self, host):
        """The commands that put the host's key files at KEYS_URL/HOST/ ([] without keys)."""
        if not self.keys:
            return []
        commands = []
        for name in self.key_files(host):
            source, target = os.path.join(self.keys, name), f"{self.keys_url}/{host.name}/{name}"
            if target.startswith("s3://"):
                commands.append(self.aws("s3", "cp", "--only-show-errors", source, target))
            else:
                commands.append(["install", "-D", "-m", "600", source, target[len("file://"):]])
        return commands

    def delete_keys(self):
        """The command that deletes every host's key files (None without keys)."""
        if not self.keys:
            return None
        if self.keys_url.startswith("s3://"):
            return self.aws("s3", "rm", "--recursive", "--only-show-errors", self.keys_url + "/")
        return ["rm", "-rf", self.keys_url[len("file://"):]]

    def describe_image(self):
        return self.aws("ec2", "describe-images", "--image-ids", self.options.ami)

    def user_data(self, host, scheduler_ip, name=None, replacing=None, spot=None):
        """The user-data of `host`'s instance; of a replacement instance `name` (HOST.r1) that
        runs only the processes `replacing` ({process: replacement name}). spot: whether the
        instance is spot (default: the [ec2] table's)."""
        settings = ec2_user_data.Settings(
            job=self.cluster.job_name, run=self.run_id, bundle_url=self.bundle_url,
            bundle_name=self.bundle_name,
            bundle_sha256=release_bundle.sha256(self.tarball) if os.path.exists(self.tarball) else "SHA256",
            results_url=self.options.results_url,
            lifetime_minutes=math.ceil(self.timeout / 60) + BOOT_MINUTES,
            keys_url=f"{self.keys_url}/{host.name}" if self.keys else "",
            key_files=" ".join(self.key_files(host)) if self.keys else "",
            checkpoint_url=self.checkpoint_url or "",
            spot=self.options.spot if spot is None else spot,
            **ec2_user_data.Settings.data_of(self.cluster, host))
        processes = ec2_user_data.host_processes(self.cluster, host, scheduler_ip, self.extra_flags,
                                                 bool(self.keys), self.checkpoint_url, replacing)
        try:
            return ec2_user_data.render(settings, name or host.name, processes)
        except ValueError as e:
            raise JobError(str(e))

    def run_instance(self, host, group_id, user_data_file, root_device, name=None, spot=None):
        """run-instances of `host`'s instance (a replacement's: `name`, HOST.r1); spot: whether
        it is a spot instance (default: the [ec2] table's)."""
        o = self.options
        argv = ["ec2", "run-instances", "--image-id", o.ami, "--instance-type", o.instance_type,
                "--count", "1", "--subnet-id", o.subnet, "--security-group-ids", group_id,
                "--instance-initiated-shutdown-behavior", "terminate",
                "--tag-specifications", self.tag_specification(
                    ["instance", "volume"], f"{self.cluster.job_name}-{name or host.name}"),
                "--user-data", "file://" + user_data_file]
        if o.key_name:
            argv += ["--key-name", o.key_name]
        if o.instance_profile:
            argv += ["--iam-instance-profile", "Name=" + o.instance_profile]
        if o.spot if spot is None else spot:
            argv += ["--instance-market-options", json.dumps(
                {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time",
                                                       "InstanceInterruptionBehavior": "terminate"}})]
        if self.placement_group:
            argv += ["--placement", json.dumps({"GroupName": self.placement_group})]
        if o.root_volume_gb:
            argv += ["--block-device-mappings", json.dumps(
                [{"DeviceName": root_device, "Ebs": {"VolumeSize": o.root_volume_gb,
                                                     "VolumeType": "gp3", "DeleteOnTermination": True}}])]
        return self.aws(*argv)

    def wait(self, state, instance_ids):
        return self.aws("ec2", "wait", "instance-" + state, "--instance-ids", *instance_ids)

    def describe_instances(self):
        """This run's instances that are not yet terminated (found by their tags)."""
        return self.aws("ec2", "describe-instances", "--filters",
                        *(f"Name=tag:{k},Values={v}" for k, v in self.tags.items()),
                        "Name=instance-state-name,Values=pending,running,shutting-down,stopping,stopped")

    def terminate(self, instance_ids):
        return self.aws("ec2", "terminate-instances", "--instance-ids", *instance_ids)

    def delete_security_group(self, group_id):
        return self.aws("ec2", "delete-security-group", "--group-id", group_id)

    def ordered_hosts(self):
        """The scheduler's host first: the others' user-data needs its address."""
        return role_commands.hosts_scheduler_first(self.cluster)

    def describe(self):
        """The plan as shell lines and each host's user-data (--dry_run)."""
        lines = [f"# job {self.cluster.job_name}, run {self.run_id}: bundle {self.tarball} "
                 f"({self.bundle_name}) at {self.bundle_url}; results in {self.results}/"]
        lines.append(shlex.join(self.describe_subnet()) + f"   # -> Subnets[0].VpcId = {VPC_ID}")
        lines.append(shlex.join(self.create_security_group(VPC_ID)) + f"   # -> GroupId = {SG_ID}")
        lines.append(shlex.join(self.authorize_ingress(SG_ID)))
        if self.placement_group:
            lines.append(shlex.join(self.create_placement_group()))
        upload = self.upload_bundle()
        lines.append(shlex.join(upload) if upload else f"# {self.bundle_url}: uploaded already")
        if self.keys:
            lines.append(f"# --auth=curve: each host's public keys and its roles' secret keys, "
                         f"from {self.keys}")
            lines += [shlex.join(argv) for host in self.ordered_hosts()
                      for argv in self.upload_keys(host)]
        if self.options.root_volume_gb:
            lines.append(shlex.join(self.describe_image()) + f"   # -> RootDeviceName = {ROOT_DEVICE}")
        user_data = []
        for host in self.ordered_hosts():
            path = f"USER_DATA_{host.name}.sh"
            argv = self.run_instance(host, SG_ID, path, ROOT_DEVICE)
            is_scheduler = host.name == self.cluster.scheduler_host().name
            lines.append(shlex.join(argv) + "   # -> Instances[0].InstanceId" +
                         (f", PrivateIpAddress = {SCHEDULER_IP}" if is_scheduler else ""))
            user_data.append(f"# ----- {path} -----\n{self.user_data(host, SCHEDULER_IP)}")
        ids = [f"ID_{h.name}" for h in self.ordered_hosts()]
        lines.append(shlex.join(self.wait("running", ids)))
        lines.append(f"# every {POLL_SECONDS} s until the scheduler has exited, or "
                     f"--timeout={self.timeout:g}s: list {self.results}/ for NAME.exit-STATUS, "
                     "HOST.done, HOST.reclaimed and HOST.failed, and")
        lines.append(shlex.join(self.describe_instances()))
        lines.append("# a dead process's replacement (--max_restarts): run-instances of a new "
                     "instance HOST.rK of its host, its user-data starting only the lost processes")
        lines.append("# always, also on failure and Ctrl-C (with the ids describe-instances finds):")
        lines.append(shlex.join(self.terminate(ids)))
        lines.append(shlex.join(self.wait("terminated", ids)))
        lines.append(shlex.join(self.delete_security_group(SG_ID)))
        if self.placement_group:
            lines.append(shlex.join(self.delete_placement_group()))
        delete_bundle = self.delete_bundle()
        if delete_bundle:
            lines.append(shlex.join(delete_bundle))
        if self.keys:
            lines.append(shlex.join(self.delete_keys()))
        for host in self.cluster.hosts:
            lines.append(f"# copy {self.results}/{host.name}/ into RUN_DIR")
        return "\n".join(lines + user_data)


"""tools/bench/recovery_time on the EC2 backend: tools/launch --backend=ec2 against the AWS
stand-in of ec2_faults_test (tests/tools/pylib/deploy/aws_stand_in.py, which the benchmark puts
on sys.path), with a spot reclaim of the server's host as its own kind of fault."""

import os
import shutil
import sys
import time

from pylib.job import fault_runs, recovery_runs
from pylib.job.errors import JobError
from recovery_job import KINDS, SCHEDULER_FLAGS, job_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Ec2:
    """tools/launch --backend=ec2 against the AWS stand-in (aws_stand_in.AwsStandIn, as
    ec2_faults_test runs it; a new one per run, its instances local process trees that start at
    once): host a (spot) the scheduler and both workers, host b (spot) the server, which
    checkpoints to the S3 stand-in (checkpoint_url); a lost process's replacement runs on a new
    instance of its host entry (a.r1, b.r1), fetching and unpacking the bundle first."""

    KINDS = ("replaced", "worker", "leave", "server", "reclaim")
    CLUSTER = """[job]
name = "recovery"
mode = "r2sp"
checkpoint_url = "s3://bucket/ckpt"
[ports]
scheduler = {port}
server = {server_port}
worker = {worker_port}
[flags]
scheduler = "{scheduler_flags}"
worker = "{flags}"
[ec2]
region = "us-east-1"
ami = "ami-0123456789abcdef0"
subnet = "subnet-0123abcd"
results_url = "file://{results}"
spot = true
[[host]]
name = "a"
scheduler = true
workers = 2
[[host]]
name = "b"
servers = 1
"""

    def __init__(self, work, bin_dir, iterations):
        import aws_stand_in
        import ec2_backend_test
        from slurm_backend_test import free_ports
        ec2_backend_test.ROOT, ec2_backend_test.BIN_DIR = ROOT, bin_dir  # what it packages
        why = aws_stand_in.cannot_run()
        if why:
            raise JobError(why)
        self.stand_in, self.work, self.iterations = aws_stand_in, work, iterations
        self.free_ports = free_ports
        self.bundle = ec2_backend_test.package(work)

    def run(self, name, kind, kill_at):
        binary, flags, sig = KINDS[kind]
        here = os.path.join(self.work, name + ".ec2")  # the stand-in's files and instances
        os.makedirs(here)
        aws = self.stand_in.AwsStandIn(here)
        try:
            cluster = os.path.join(here, "cluster.toml")
            ports = self.free_ports()  # every instance is 127.0.0.1: no two may share a port
            with open(cluster, "w") as f:
                f.write(self.CLUSTER.format(
                    port=ports[0], server_port=ports[1], worker_port=ports[2],
                    flags=job_flags(self.iterations), scheduler_flags=SCHEDULER_FLAGS,
                    results=os.path.join(here, "results")))
            run_dir = os.path.join(self.work, name)
            argv = [sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + cluster,
                    "--backend=ec2", "--bundle=" + self.bundle, "--run_dir=" + run_dir,
                    "--quiet", "--timeout=300", *flags]
            runs = f"runs/recovery-{name}"
            needle = f"{runs}/" + ("metrics_worker1.jsonl" if binary == "worker" else "checkpoints")
            fault = (self.reclaim(aws, needle, f"{here}/results/recovery/{name}/b.reclaimed")
                     if kind == "reclaim" else recovery_runs.kill(binary, needle, sig))
            died_at = recovery_runs.run_with_fault(
                argv, aws.launch_env(), f"{here}/ec2/instances/*/{runs}/metrics_worker0.jsonl",
                kill_at, fault)
        finally:
            aws.close()
        shutil.rmtree(here, ignore_errors=True)  # unpacked bundles; the run's files are in run_dir
        return os.path.join(run_dir, "summary.json"), died_at

    @staticmethod
    def reclaim(aws, needle, marker):
        """A spot reclaim of host b: the interruption notice in the metadata stand-in; once b
        has stopped its server (checkpointed to the S3 stand-in) and reported b.reclaimed, AWS
        takes the instance. Returns the Unix time the server was seen gone."""
        def act():
            server = recovery_runs.find("server", needle)
            if not server:
                raise JobError(f"no server process with an argument containing {needle}")
            aws.imds.interrupt(aws.instance_of("recovery-b"))
            died_at = wait_for(lambda: not fault_runs.cmdline(server[0]), "b's server to stop")
            wait_for(lambda: os.path.exists(marker), "b.reclaimed")
            aws.ec2.reclaim(aws.instance_of("recovery-b"))
            return died_at
        return act

    def close(self, keep):
        pass


def wait_for(check, what, seconds=150):
    """The Unix time `check()` first held (polled every 20 ms); JobError after `seconds`."""
    deadline = time.time() + seconds
    while not check():
        if time.time() > deadline:
            raise JobError(f"no {what} after {seconds} s")
        time.sleep(0.02)
    return time.time()

"""The local AWS stand-in that tools/launch --backend=ec2 runs against in ec2_faults_test and
tools/bench/recovery_time: the real AWS CLI against fake_ec2.FakeEc2 (each instance its
user-data run as a local process tree, at once), fake_imds.FakeImds for the spot interruption
notices, and tests/tools/deploy/fake_aws as `aws` on the instances' PATH, whose `aws s3` keeps
s3://BUCKET/KEY under DIR/s3 (checkpoint_url = "s3://bucket/ckpt") and hands `aws ec2` to the
real CLI. No credentials: fake ones, and the metadata service is never asked for any."""

import os

from ec2_backend_test import aws_cli, cannot_run_cli
from fake_ec2 import FakeEc2
from fake_imds import FakeImds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
FAKE_AWS = os.path.join(ROOT, "tests", "tools", "deploy", "fake_aws")


def cannot_run():
    """Why the stand-in cannot run here (no AWS CLI, no built binaries, no patchelf), or None."""
    return cannot_run_cli()


class AwsStandIn:
    """The stand-in's servers and files under `directory` (made by the caller; removed by it:
    s3/, bin/aws, ec2/instances/ID/ per instance). close() kills every instance and stops the
    servers. launch_env(): tools/launch's environment, aimed at it."""

    def __init__(self, directory):
        self.dir = directory
        self.s3 = os.path.join(directory, "s3")
        bin_dir = os.path.join(directory, "bin")
        os.makedirs(self.s3)
        os.makedirs(bin_dir)
        os.symlink(FAKE_AWS, os.path.join(bin_dir, "aws"))  # aws s3 here, aws ec2 the real CLI's
        with open(os.path.join(directory, "aws_config"), "w") as f:
            f.write("[default]\n")
        self.env = {"PATH": bin_dir + os.pathsep + os.environ["PATH"], "S3_ROOT": self.s3,
                    "R2SP_REAL_AWS": aws_cli(), "AWS_ACCESS_KEY_ID": "AKIAFAKEFAKEFAKEFAKE",
                    "AWS_SECRET_ACCESS_KEY": "fake/secret", "AWS_EC2_METADATA_DISABLED": "true",
                    "AWS_CONFIG_FILE": os.path.join(directory, "aws_config"),
                    "AWS_SHARED_CREDENTIALS_FILE": os.path.join(directory, "no_credentials")}
        self.imds = FakeImds()
        try:
            self.ec2 = FakeEc2(os.path.join(directory, "ec2"), imds=self.imds,
                               env=dict(os.environ, **self.env))
        except BaseException:
            self.imds.close()
            raise

    def launch_env(self):
        return dict(os.environ, **self.env, R2SP_AWS_ENDPOINT_URL=self.ec2.url)

    def instance_of(self, name):
        """The id of the instance tagged Name=`name` (JOB-HOST, JOB-HOST.r1); KeyError if none."""
        for instance_id, instance in list(self.ec2.instances.items()):
            if instance["tags"].get("Name") == name:
                return instance_id
        raise KeyError(f"no instance named {name}")

    def close(self):
        self.ec2.close()
        self.imds.close()

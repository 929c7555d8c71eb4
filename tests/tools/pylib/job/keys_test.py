"""tools/pylib/job_keys.py: which key files a host of given roles gets, the flags, the checks of
a keys directory (missing files, secret keys others may read), making the job's keys with a
stand-in keygen (new keys for a new job, the same for a resumed one, --keys_dir as it is), and
copies that are the user's only."""

import argparse
import os
import shutil
import stat
import sys
import tempfile
import unittest

from pylib.job import keys as job_keys
import junit_main
from pylib.job.errors import JobError

# A stand-in keygen: writes DIR/ROLE.{pub,key} with the real one's modes; refuses to replace
# keys without --force; with $FAIL_KEYGEN set, fails with that message.
FAKE_KEYGEN = r'''#!PYTHON
import os, secrets, sys
if os.environ.get("FAIL_KEYGEN"):
    sys.exit("keygen: error: " + os.environ["FAIL_KEYGEN"])
directory = sys.argv[1]
if os.path.exists(os.path.join(directory, "scheduler.pub")) and "--force" not in sys.argv:
    sys.exit("keygen: error: keys exist; pass --force")
os.makedirs(directory, mode=0o700, exist_ok=True)
for role in ("scheduler", "server", "worker"):
    for suffix, mode in ((".pub", 0o644), (".key", 0o600)):
        path = os.path.join(directory, role + suffix)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as f:
            f.write(secrets.token_hex(20) + "\n")
        os.chmod(path, mode)
'''


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def texts(directory):
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as f:
            out[name] = f.read()
    return out


class FilesTest(unittest.TestCase):
    def test_every_public_key_and_only_the_roles_secret_keys(self):
        self.assertEqual(job_keys.files_for(["worker"]),
                         ["scheduler.pub", "server.pub", "worker.pub", "worker.key"])
        self.assertEqual(job_keys.files_for(["worker", "scheduler"]),
                         ["scheduler.pub", "server.pub", "worker.pub", "scheduler.key", "worker.key"])
        self.assertEqual(len(job_keys.files_for(job_keys.ROLES)), 6)

    def test_flags(self):
        self.assertEqual(job_keys.node_flags("/k"), ["--auth=curve", "--keys_dir=/k"])
        none = argparse.Namespace(auth="none", keys_dir="", run_dir="/r")
        self.assertEqual(job_keys.flags(none), [])
        curve = argparse.Namespace(auth="curve", keys_dir="", run_dir="/r")
        self.assertEqual(job_keys.flags(curve), ["--auth=curve", "--keys_dir=/r/keys"])
        curve.keys_dir = "/mine"
        self.assertEqual(job_keys.flags(curve), ["--auth=curve", "--keys_dir=/mine"])
        self.assertEqual(job_keys.keys_dir(argparse.Namespace(keys_dir="", run_dir="")), "RUN_DIR/keys")


class KeysTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.bin_dir = os.path.join(self.dir, "bin")
        path = os.path.join(self.bin_dir, job_keys.KEYGEN)
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write(FAKE_KEYGEN.replace("PYTHON", sys.executable))
        os.chmod(path, 0o755)
        self.run_dir = os.path.join(self.dir, "run")
        os.makedirs(self.run_dir)
        self.addCleanup(os.environ.pop, "FAIL_KEYGEN", None)

    def tearDown(self):
        self._tmp.cleanup()

    def args(self, **kwargs):
        return argparse.Namespace(**{"auth": "curve", "keys_dir": "", "run_dir": self.run_dir,
                                     "bin_dir": self.bin_dir, "resume": "", **kwargs})

    def test_made_into_the_run_directory_with_their_modes(self):
        keys = job_keys.prepare(self.args())
        self.assertEqual(keys, os.path.join(self.run_dir, "keys"))
        self.assertEqual(mode(keys), 0o700)
        self.assertEqual(sorted(os.listdir(keys)), sorted(job_keys.files_for(job_keys.ROLES)))
        for role in job_keys.ROLES:
            self.assertEqual(mode(os.path.join(keys, role + ".key")), 0o600)

    def test_a_new_job_gets_new_keys_a_resumed_one_keeps_them(self):
        keys = job_keys.prepare(self.args())
        first = texts(keys)
        job_keys.prepare(self.args(resume=self.run_dir))
        self.assertEqual(texts(keys), first)
        job_keys.prepare(self.args())
        self.assertFalse(set(texts(keys).values()) & set(first.values()))
        # Rotating a job's keys on --resume: delete them, and it gets new ones.
        second = texts(keys)
        shutil.rmtree(keys)
        job_keys.prepare(self.args(resume=self.run_dir))
        self.assertEqual(len(texts(keys)), 6)
        self.assertFalse(set(texts(keys).values()) & set(second.values()))

    def test_no_auth_no_keys(self):
        self.assertIsNone(job_keys.prepare(self.args(auth="none")))
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "keys")))
        with self.assertRaisesRegex(JobError, "--keys_dir needs --auth=curve"):
            job_keys.prepare(self.args(auth="none", keys_dir="/k"))

    def test_keys_dir_is_checked_for_the_roles_asked(self):
        mine = os.path.join(self.dir, "mine")
        job_keys.generate(self.bin_dir, mine)
        before = texts(mine)
        self.assertEqual(job_keys.prepare(self.args(keys_dir=mine)), mine)
        self.assertEqual(texts(mine), before)
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "keys")))
        os.remove(os.path.join(mine, "scheduler.key"))
        self.assertEqual(job_keys.prepare(self.args(keys_dir=mine), roles=["worker"]), mine)
        with self.assertRaisesRegex(JobError, r"mine/scheduler.key: No such file or directory: "
                                              r"--auth=curve needs the job's keys \(tools/keygen"):
            job_keys.prepare(self.args(keys_dir=mine))

    def test_a_secret_key_others_may_read_is_refused(self):
        keys = job_keys.prepare(self.args())
        os.chmod(os.path.join(keys, "server.key"), 0o604)
        with self.assertRaisesRegex(JobError, r"secret key file .*/keys/server.key has mode 0604: "
                                              r"group and others must have no access"):
            job_keys.check(keys)
        job_keys.check(keys, ["scheduler", "worker"])  # a host without servers does not read it
        os.chmod(os.path.join(keys, "server.key"), 0o600)
        os.chmod(os.path.join(keys, "server.pub"), 0o644)  # public keys may be read by all
        job_keys.check(keys)

    def test_keygen_missing_or_failing(self):
        os.environ["FAIL_KEYGEN"] = "cannot write"
        with self.assertRaisesRegex(JobError, "making the job's keys failed .*cannot write"):
            job_keys.prepare(self.args())
        os.remove(os.path.join(self.bin_dir, job_keys.KEYGEN))
        with self.assertRaisesRegex(JobError, "keygen not found: .*--keys_dir=DIR"):
            job_keys.prepare(self.args())

    def test_copies_are_the_users_only(self):
        keys = job_keys.prepare(self.args())
        target = os.path.join(self.dir, "copy", "keys")
        job_keys.copy(keys, target, job_keys.files_for(["worker"]))
        self.assertEqual(mode(target), 0o700)
        self.assertEqual(sorted(os.listdir(target)), sorted(job_keys.files_for(["worker"])))
        for name in os.listdir(target):
            self.assertEqual(mode(os.path.join(target, name)), 0o600, name)
        self.assertEqual(texts(target), {n: t for n, t in texts(keys).items() if n in os.listdir(target)})
        job_keys.copy(keys, target, job_keys.files_for(["worker"]))  # again, over them
        self.assertEqual(mode(os.path.join(target, "worker.key")), 0o600)

    def test_describe_names_paths_only(self):
        self.assertEqual(job_keys.describe(self.args(keys_dir="/mine")), "# --auth=curve: the keys in /mine")
        self.assertIn(f"{self.bin_dir}/common/auth/keygen {self.run_dir}/keys",
                      job_keys.describe(self.args()))


if __name__ == "__main__":
    junit_main.main()

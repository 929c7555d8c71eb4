"""tools/launch --backend=ssh with the cluster file's checkpoint_url on a directory the hosts
share (ssh_faults_test's hosts and job, the mlp on Fashion-MNIST): a server killed on node1 is
replaced on node0, another host, from the checkpoints node1 copied there, and the job ends within
1 point of the same job undisturbed (r2sp); a bsp job stopped with SIGTERM, its hosts' own
checkpoints then deleted, resumes with tools/launch --resume from the URL's copies alone. Needs
root and Fashion-MNIST; skipped otherwise."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

import junit_main
import ssh_backend_test
from ssh_faults_test import SshJobs, why_not

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# Under Bazel the imports above resolve to the source tree: the hosts' bundle and tools/launch
# come from this test's runfiles instead.
ssh_backend_test.ROOT = ROOT
ssh_backend_test.BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)


@unittest.skipIf(why_not(), why_not() or "")
class SshCheckpointUrlTest(SshJobs):

    def test_a_killed_server_is_restored_on_another_host_from_the_checkpoint_url(self):
        """r2sp (steadier than asp): the killed server's replacement runs on node0, restores
        from the checkpoints node1 copied to the shared checkpoint_url, and the job ends within
        1 point of the same job undisturbed."""
        url = os.path.join(self.dir, "shared_checkpoints")
        flags = ["--checkpoint_every=100steps", "--worker_flags=--max_steps=700"]
        proc, run_dir = self.start("url", flags + ["--max_restarts=server:1"], "r2sp",
                                   f'checkpoint_url = "file://{url}"')
        self.wait_for_steps(proc, "node1", run_dir, 0, 250)
        self.kill_remote("node1", "server")
        s = self.finish(proc, run_dir)
        self.assertEqual(self.events(s, "server"), [("server1", "died", 137),
                                                    ("server1.r1", "restarted", 137)], s)
        self.assertIn("resumed from", self.log(run_dir, "server1.r1"))
        # It ran on node0, whose checkpoint directory took both shards from the URL.
        self.assertEqual(sorted(os.listdir(os.path.join(self.host_run_dir("node0", run_dir),
                                                        "checkpoints"))), ["server0", "server1"])
        there = os.path.join(url, "ssh-test-url")
        self.assertEqual(sorted(os.listdir(there)), ["server0", "server1"])
        for shard in os.listdir(there):  # whole checkpoints only, the newest 3
            names = os.listdir(os.path.join(there, shard))
            self.assertTrue(names and len(names) <= 3 and all(n.startswith("ckpt-") for n in names),
                            names)
        proc, undisturbed_dir = self.start("url_undisturbed", flags, "r2sp",
                                           f'checkpoint_url = "file://{url}"')
        undisturbed = self.finish(proc, undisturbed_dir)
        self.assertLess(abs(s["final_test_accuracy"] - undisturbed["final_test_accuracy"]), 0.01,
                        (s["final_test_accuracy"], undisturbed["final_test_accuracy"]))

    def test_a_stopped_job_resumes_from_its_checkpoint_url(self):
        """SIGTERM to the launcher (bsp): every server checkpoints and its run_role copies the
        checkpoint to the URL; with the hosts' own checkpoints gone, tools/launch
        --resume=RUN_DIR runs the job again, every server taking up its shard from the URL's
        copies, and it completes."""
        url = os.path.join(self.dir, "shared_checkpoints")
        proc, run_dir = self.start("resumed", ["--checkpoint_every=100steps",
                                               "--worker_flags=--max_steps=400"], "bsp",
                                   f'checkpoint_url = "file://{url}"')
        self.wait_for_steps(proc, "node1", run_dir, 0, 150)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, out)
        there = os.path.join(url, "ssh-test-resumed")
        deadline = time.time() + 30  # the hosts copy the SIGTERM checkpoints as they stop
        while time.time() < deadline and not (os.path.isdir(there) and len(os.listdir(there)) == 2):
            time.sleep(0.2)
        self.assertEqual(sorted(os.listdir(there)), ["server0", "server1"])
        self.assertEqual(self.leftovers(), [])
        for host in ("node0", "node1"):  # as on fresh hosts: the URL's copies are all there is
            shutil.rmtree(os.path.join(self.host_run_dir(host, run_dir), "checkpoints"))
        r = subprocess.run(self.cluster.exec_prefix("launcher") + [
            sys.executable, os.path.join(ssh_backend_test.ROOT, "tools", "launch"),
            "--resume=" + run_dir, "--quiet", "--timeout=120"],
            capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(run_dir, "summary.json")) as f:
            s = json.load(f)
        self.assertEqual((s["completed"], s["resumed"], s["attempt"]), (True, True, 2), s)
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        for server in ("server0", "server1"):
            self.assertIn("resumed from", self.log(run_dir, server))
        self.assertTrue(os.path.exists(os.path.join(run_dir, "attempt-1", "worker0.log")))


if __name__ == "__main__":
    junit_main.main()

"""tools/launch --backend=ssh through failures, against real sshd servers in network namespaces
(ssh_backend_test's hosts): the mlp on Fashion-MNIST (asp, 2 servers on node0 and node1, worker0
on node1, worker1 on node2). kill -9 of the remote worker1 process (the worker binary on node2,
not the launcher's ssh): the job goes on, the survivor takes over its data, completes with an
accuracy, and summary.json records the death as a local run's does; with --max_restarts=1 its
replacement worker1.r1 starts over a new ssh on node2 and joins the running job; with
--max_restarts=server:1 --checkpoint_every=100steps a killed server is replaced on its host and
restores its shard from that host's checkpoints (with a checkpoint_url: ssh_checkpoint_url_test).
Needs root and Fashion-MNIST; skipped otherwise."""

import json
import os
import signal
import subprocess
import time
import unittest

import junit_main
from pylib.job.fault_runs import steps_done
import ssh_backend_test
from ssh_backend_test import SshHosts, cannot_run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# Under Bazel the import above resolves to the source tree: the hosts' bundle and tools/launch
# come from this test's runfiles instead.
ssh_backend_test.ROOT = ROOT
ssh_backend_test.BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)

MNIST = "/usr/share/datasets/fashion-mnist"  # the hosts share this machine's files
NODE = "--heartbeat_ms=200"
FLAGS = f"""scheduler = "--heartbeat_timeout_ms=1000 --partition_bytes=262144"
server = "{NODE}"
worker = "--model=mlp --data=fashion-mnist --data_dir={MNIST} --batch_size=64 --threads=1 --log_every=25 {NODE}"
"""


def why_not():
    return cannot_run() or (None if os.path.isdir(MNIST) else "Fashion-MNIST is not installed")


class SshJobs(SshHosts):
    """Starting the mlp job on the hosts, killing a remote process, reading the outcome
    (ssh_checkpoint_url_test shares them)."""

    def start(self, name, flags, mode="asp", job=""):
        """Starts the mlp job (asp unless `mode`; `job`: more [job] lines) in DIR/NAME with
        tools/launch `flags`; (Popen, run dir)."""
        run_dir = os.path.join(self.dir, name)
        argv = self.launch_argv(self.cluster_file(mode=mode, flags=FLAGS, workdirs="faults",
                                                  job=job), run_dir, flags)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return proc, run_dir

    def host_run_dir(self, host, run_dir):
        return os.path.join(self.dir, "faults", host, "runs", "ssh-test-" + os.path.basename(run_dir))

    def wait_for_steps(self, proc, host, run_dir, worker, steps):
        deadline = time.time() + 120
        while steps_done(self.host_run_dir(host, run_dir), worker) < steps:
            if proc.poll() is not None or time.time() > deadline:
                self.fail(f"worker{worker} never reached step {steps}: {proc.stdout.read()}")
            time.sleep(0.1)

    def kill_remote(self, host, binary):
        """SIGKILL to the one `binary` process (scheduler, server, worker) in `host`'s namespace."""
        pids = [pid for pid, name in self.leftover_pids(host).items() if name == binary]
        self.assertEqual(len(pids), 1, self.leftover_pids(host))
        os.kill(pids[0], signal.SIGKILL)

    def finish(self, proc, run_dir):
        out, _ = proc.communicate(timeout=240)
        self.assertEqual(proc.returncode, 0, out)
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertTrue(summary["completed"], summary)
        self.assertEqual(self.leftovers(), [])
        return summary

    def events(self, summary, prefix):
        return [(e["process"], e["event"], e["status"]) for e in summary["events"]
                if e["process"].startswith(prefix)]

    def log(self, run_dir, name):
        with open(os.path.join(run_dir, name + ".log")) as f:
            return f.read()


@unittest.skipIf(why_not(), why_not() or "")
class SshFaultsTest(SshJobs):
    def test_a_killed_worker_is_recorded_and_the_survivor_takes_over_its_data(self):
        # Each step's compute at least 12.8 ms, so that epoch 1 outlasts the death's detection
        # however fast the machine (stretched compute left a quiet machine's steps at 3 ms).
        proc, run_dir = self.start("absorbed", ["--worker_flags=--epochs=2 --emulate_ms_per_sample=0.2"])
        self.wait_for_steps(proc, "node2", run_dir, 1, 50)
        self.kill_remote("node2", "worker")
        s = self.finish(proc, run_dir)
        # run_role's status for a process killed by SIGKILL, through ssh.
        self.assertEqual(self.events(s, "worker"), [("worker1", "died", 137)], s)
        self.assertEqual((s["deaths"], s["restarts"]), ({"worker": 1, "server": 0},
                                                        {"worker": 0, "server": 0}))
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        self.assertIn("epoch 2 also trains a share of the data of 1 dead worker",
                      self.log(run_dir, "worker0"))

    def test_a_killed_worker_is_replaced_on_its_host_and_joins(self):
        proc, run_dir = self.start("replaced", ["--max_restarts=1", "--worker_flags=--epochs=2"])
        self.wait_for_steps(proc, "node2", run_dir, 1, 100)
        self.kill_remote("node2", "worker")
        s = self.finish(proc, run_dir)
        self.assertEqual(self.events(s, "worker1"), [("worker1", "died", 137),
                                                     ("worker1.r1", "restarted", 137)], s)
        self.assertEqual((s["deaths"], s["restarts"]), ({"worker": 1, "server": 0},
                                                        {"worker": 1, "server": 0}))
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        log = self.log(run_dir, "worker1.r1")
        self.assertIn("joined the running job", log)
        self.assertIn("done", log)
        # Its own metrics, fetched from node2 beside the dead one's.
        for name in ("metrics_worker1.jsonl", "metrics_worker1.r1.jsonl"):
            self.assertTrue(os.path.exists(os.path.join(run_dir, name)), name)

    def test_a_killed_server_is_replaced_on_its_host_from_its_checkpoints(self):
        proc, run_dir = self.start("server", ["--max_restarts=server:1",
                                              "--checkpoint_every=100steps",
                                              "--worker_flags=--max_steps=700"])
        self.wait_for_steps(proc, "node1", run_dir, 0, 250)
        self.kill_remote("node1", "server")
        s = self.finish(proc, run_dir)
        self.assertEqual(self.events(s, "server"), [("server1", "died", 137),
                                                    ("server1.r1", "restarted", 137)], s)
        self.assertEqual((s["deaths"], s["restarts"]), ({"worker": 0, "server": 1},
                                                        {"worker": 0, "server": 1}))
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        self.assertLessEqual(s["recovery"]["updates_lost_steps"], 103, s)
        self.assertIn("resumed from", self.log(run_dir, "server1.r1"))
        self.assertIn("replaced by", self.log(run_dir, "scheduler"))
        checkpoints = os.path.join(self.host_run_dir("node1", run_dir), "checkpoints")
        self.assertEqual(len(os.listdir(checkpoints)), 1)  # the shard of node1's server


if __name__ == "__main__":
    junit_main.main()

"""r2sp-run (python -m r2sp.run) in real jobs from a checkout's build: the scheduler, server and
worker binaries and run_train.py as the script. One node (--standalone) trains 2 workers, each
given torchrun's variables, and writes summary.json; two nodes (two r2sp-run processes on
loopback, 2 workers each) train 4 workers, and a worker of node 1 that dies is restarted with
--max_restarts=1 while the job goes on; two nodes in network namespaces of their own (each its
own address) train together; the pods of examples/launch/pytorchjob.yaml, given the
variables a PyTorchJob's pods get, train together (and their templates pass kubectl's offline
checks); SIGTERM stops a node's processes (status 143); a node whose master never comes, and a
master whose port is taken, end with their exact exit status and message."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

import job_harness
import r2sp_testing

sys.path.insert(0, os.path.join(r2sp_testing.ROOT, "tools"))  # the launcher's library
from pylib.emulation import netcluster  # noqa: E402

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_train.py")
MANIFEST = os.path.join(r2sp_testing.ROOT, "examples", "launch", "pytorchjob.yaml")
FLAGS = "--worker_flags=--epochs=2 --batch_size=8 --heartbeat_ms=200"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipIf(SKIP or job_harness.cannot_run(), SKIP or job_harness.cannot_run() or "")
class RunJobTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="r2sp_run_")  # outside the checkout
        self.env = dict(os.environ, RUN_OUT=self.dir, R2SP_BIN_DIR=job_harness.BIN_DIR,
                        PYTHONPATH=os.path.join(r2sp_testing.ROOT, "worker", "python"),
                        R2SP_CORE=r2sp_testing.core_path())

    def start(self, *argv, **env):
        return subprocess.Popen([sys.executable, "-m", "r2sp.run", *argv], cwd=self.dir,
                                env=dict(self.env, **env), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def finish(self, proc, timeout=120):
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out

    def result(self, rank):
        with open(os.path.join(self.dir, f"worker{rank}.json")) as f:
            return json.load(f)

    def test_one_node_gives_each_worker_torchruns_variables_and_writes_a_summary(self):
        status, out = self.finish(self.start("--standalone", "--nproc_per_node=2", FLAGS,
                                             "--log_dir=run", SCRIPT, "--lr=0.1"))
        self.assertEqual(status, 0, out)
        port = None
        for rank in range(2):
            r = self.result(rank)
            port = port or r["MASTER_PORT"]
            self.assertEqual(r, {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                                 "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                 "MASTER_PORT": port, "argv": ["--lr=0.1"], "steps": 8})
        with open(os.path.join(self.dir, "run", "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["completed"], summary["workers"], summary["servers"],
                          summary["mode"], summary["iterations"]), (True, 2, 1, "bsp", 8))
        with open(os.path.join(self.dir, "run", "scheduler.endpoint")) as f:
            self.assertEqual(f.read().strip(), "tcp://127.0.0.1:" + port)

    def test_two_nodes_train_four_workers_and_a_dead_one_is_restarted(self):
        port = str(free_port())
        # Long enough (12 epochs of 2 steps) for the replacement to join a loaded machine's job.
        common = ["--nnodes=2", "--master_addr=127.0.0.1", "--master_port=" + port,
                  "--nproc_per_node=2", FLAGS.replace("--epochs=2", "--epochs=12")]
        mark = os.path.join(self.dir, "died")
        master = self.start(*common, "--node_rank=0", "--log_dir=node0", SCRIPT)
        other = self.start(*common, "--node_rank=1", "--max_restarts=1", "--log_dir=node1",
                           SCRIPT, DIE_RANK="3", DIE_MARK=mark, STEP_SLEEP="0.2")
        status1, out1 = self.finish(other)
        status0, out0 = self.finish(master)
        self.assertEqual((status0, status1), (0, 0), out0 + out1)
        self.assertTrue(os.path.exists(mark))
        self.assertIn("r2sp-run: worker3 died (status 9); starting replacement worker3.r1",
                      out1)
        self.assertIn(f"r2sp-run: node 1: workers 2..3 of 4, scheduler tcp://127.0.0.1:{port}",
                      out1)
        for rank in range(3):
            r = self.result(rank)
            self.assertEqual((r["RANK"], r["LOCAL_RANK"], r["WORLD_SIZE"], r["LOCAL_WORLD_SIZE"],
                              r["MASTER_PORT"]), (str(rank), str(rank % 2), "4", "2", port))
        self.assertEqual(self.result(3)["LOCAL_RANK"], "1")  # the replacement's
        self.assertTrue(os.path.exists(os.path.join(self.dir, "node1", "worker3.r1.log")))
        with open(os.path.join(self.dir, "node0", "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["completed"], summary["workers"]), (True, 4))

    @unittest.skipIf(netcluster.can_run(), netcluster.can_run() or "")
    def test_two_nodes_in_network_namespaces_train_four_workers(self):
        """Each node in a network namespace of its own, with its own address on a bridge:
        node 1's processes listen on its address and reach node 0's scheduler at its."""
        cluster = netcluster.Cluster(["node0", "node1"], rates={})
        self.addCleanup(cluster.down)
        cluster.up()
        master = cluster.addresses["node0"]
        common = ["--nnodes=2", f"--master_addr={master}", "--master_port=29400",
                  "--nproc_per_node=2", FLAGS, SCRIPT]
        procs = []
        for node in (0, 1):
            argv = [sys.executable, "-m", "r2sp.run", f"--node_rank={node}",
                    f"--log_dir=ns{node}", *common]
            procs.append(subprocess.Popen(cluster.exec_prefix(f"node{node}") + argv,
                                          cwd=self.dir, env=self.env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outcomes = [self.finish(p) for p in procs]
        self.assertEqual([status for status, _ in outcomes], [0, 0], outcomes)
        for rank in range(4):
            self.assertEqual(self.result(rank)["MASTER_ADDR"], master)
        self.assertIn(f"r2sp-run: node 1: workers 2..3 of 4, scheduler tcp://{master}:29400",
                      outcomes[1][1])
        with open(os.path.join(self.dir, "ns0", "scheduler.endpoint")) as f:
            self.assertEqual(f.read().strip(), f"tcp://{master}:29400")

    def test_two_nodes_with_curve_keys_train_together(self):
        """--auth=curve: every process of both nodes encrypts with the job's keys."""
        keys = os.path.join(self.dir, "keys")
        r = subprocess.run([os.path.join(job_harness.BIN_DIR, "common", "auth", "keygen"), keys],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        port = str(free_port())
        common = ["--nnodes=2", "--master_port=" + port, "--nproc_per_node=1", "--auth=curve",
                  "--keys_dir=" + keys, FLAGS, SCRIPT]
        procs = [self.start(f"--node_rank={n}", f"--log_dir=curve{n}", *common, DUMP_FLAGS="1")
                 for n in (0, 1)]
        outcomes = [self.finish(p) for p in procs]
        self.assertEqual([status for status, _ in outcomes], [0, 0], outcomes)
        with open(os.path.join(self.dir, "curve0", "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["completed"], summary["workers"], summary["auth"]),
                         (True, 2, "curve"))
        for rank in (0, 1):
            flags = self.result(rank)["flags"].split()
            self.assertIn("--auth=curve", flags)
            self.assertIn("--keys_dir=" + keys, flags)
            self.assertEqual(self.result(rank)["steps"], 8)

    def test_a_pytorchjobs_pods_train_with_the_manifests_command(self):
        """examples/launch/pytorchjob.yaml's Master and Worker pods: each pod's command (its
        script and data replaced by run_train.py, the job shortened) with the variables the
        training operator gives the pods, and nothing else."""
        with open(MANIFEST) as f:
            manifest = yaml.safe_load(f)
        port, procs = str(free_port()), []
        for rank, role in enumerate(("Master", "Worker")):
            command = manifest["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"][
                "containers"][0]["command"]
            self.assertEqual(command[0], "r2sp-run")
            pod = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2",
                   "RANK": str(rank), "PET_NPROC_PER_NODE": manifest["spec"]["nprocPerNode"]}
            procs.append(self.start(*command[1:-2], FLAGS, f"--log_dir=pod{rank}", SCRIPT,
                                    **pod))
        outcomes = [self.finish(p) for p in procs]
        self.assertEqual([status for status, _ in outcomes], [0, 0], outcomes)
        for rank in range(4):
            r = self.result(rank)
            self.assertEqual((r["RANK"], r["LOCAL_RANK"], r["WORLD_SIZE"], r["LOCAL_WORLD_SIZE"],
                              r["MASTER_PORT"]), (str(rank), str(rank % 2), "4", "2", port))

    @unittest.skipIf(shutil.which(os.environ.get("R2SP_KUBECTL", "kubectl")) is None,
                     "needs kubectl")
    def test_the_pytorchjobs_pod_templates_pass_kubectls_offline_checks(self):
        """kubectl knows no PyTorchJob offline: each replica's pod template, as a Pod, goes
        through its typed decoding (set image --local), as the k8s backend's manifests do."""
        with open(MANIFEST) as f:
            manifest = yaml.safe_load(f)
        self.assertEqual((manifest["apiVersion"], manifest["kind"]),
                         ("kubeflow.org/v1", "PyTorchJob"))
        for role, spec in manifest["spec"]["pytorchReplicaSpecs"].items():
            pod = os.path.join(self.dir, role + ".json")
            with open(pod, "w") as f:
                json.dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": role.lower()},
                           "spec": spec["template"]["spec"]}, f)
            r = subprocess.run([os.environ.get("R2SP_KUBECTL", "kubectl"), "set", "image",
                                "--local", "-f", pod, "pytorch=image:1", "-o", "json"],
                               capture_output=True, text=True, env={"KUBECONFIG": "",
                                                                    "PATH": os.environ["PATH"]})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["spec"]["containers"][0]["image"], "image:1")

    def test_sigterm_stops_the_nodes_processes(self):
        proc = self.start("--standalone", "--nproc_per_node=2", FLAGS, "--log_dir=stopped",
                          SCRIPT, STEP_SLEEP="0.5")
        log = os.path.join(self.dir, "stopped", "worker0.log")
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(log) and
                                              "worker 0" in open(log).read()):  # joined
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        status, out = self.finish(proc)
        self.assertEqual(status, 128 + signal.SIGTERM, out)
        self.assertIn(f"r2sp-run: signal {int(signal.SIGTERM)}: stopped this node's processes",
                      out)
        left = subprocess.run(["pgrep", "-f", SCRIPT], capture_output=True, text=True).stdout
        self.assertEqual(left, "")

    def test_a_node_whose_master_never_comes_fails(self):
        status, out = self.finish(self.start(
            "--nnodes=2", "--node_rank=1", "--nproc_per_node=2", f"--master_port={free_port()}",
            FLAGS + " --register_wait_s=1", "--log_dir=alone", SCRIPT))
        self.assertEqual(status, 1, out)
        for rank in (2, 3):
            self.assertIn(f"r2sp-run: worker{rank} failed (status 1); see "
                          f"{self.dir}/alone/worker{rank}.log", out)

    def test_a_master_port_in_use_is_refused(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            status, out = self.finish(self.start("--nnodes=2", f"--master_port={port}",
                                                 "--log_dir=taken", SCRIPT))
        self.assertEqual(status, 2, out)
        self.assertEqual(out, f"r2sp-run: error: --master_port={port}: cannot listen on "
                              f"127.0.0.1:{port} (Address already in use); give another port\n")


if __name__ == "__main__":
    junit_main.main()

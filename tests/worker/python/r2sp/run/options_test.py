"""r2sp-run's command line (r2sp.run.options): torchrun's options in both spellings, the
defaults the environment gives (torchrun's PET_*, a PyTorchJob pod's, Slurm's under srun, in
that order of precedence), R2SP's options folded into the processes' flags, and each bad
command line's exact message."""

import os
import sys
import tempfile
import unittest

import r2sp_testing

r2sp_testing.setup_path()
import junit_main  # noqa: E402

from r2sp.run import options  # noqa: E402

SCRIPT = os.path.abspath(__file__)  # a file that exists


def plan(*argv, environ=None):
    return options.parse(list(argv) + [SCRIPT, "--lr=0.1"], environ or {})


class OptionsTest(unittest.TestCase):
    def assertUsage(self, message, *argv, environ=None, script=SCRIPT):
        with self.assertRaises(options.UsageError) as e:
            options.parse(list(argv) + [script], environ or {})
        self.assertEqual(str(e.exception), message)

    def test_defaults_are_one_node_of_one_worker_on_loopback(self):
        p = plan()
        self.assertEqual((p.nnodes, p.node_rank, p.nproc_per_node, p.master_addr, p.master_port,
                          p.max_restarts, p.servers, p.sync), (1, 0, 1, "127.0.0.1", 29500, 0,
                                                               1, "bsp"))
        self.assertEqual(p.command, [sys.executable, "-u", SCRIPT, "--lr=0.1"])
        self.assertEqual(os.path.dirname(os.path.dirname(p.run_dir)), os.getcwd())
        self.assertTrue(p.run_dir.endswith("-node0"), p.run_dir)

    def test_torchruns_options_in_both_spellings(self):
        p = plan("--nnodes=3", "--node-rank=2", "--nproc-per-node=4", "--master-addr=10.0.0.1",
                 "--master_port=1234", "--max-restarts=2")
        self.assertEqual((p.nnodes, p.node_rank, p.nproc_per_node, p.master_addr, p.master_port,
                          p.max_restarts, p.world_size, list(p.local_ranks)),
                         (3, 2, 4, "10.0.0.1", 1234, 2, 12, [8, 9, 10, 11]))
        p = plan("--nnodes=2:2", "--rdzv_endpoint=head:4000", "--rdzv_backend=c10d")
        self.assertEqual((p.nnodes, p.master_addr, p.master_port), (2, "head", 4000))

    def test_the_script_as_a_module_or_a_program(self):
        self.assertEqual(options.parse(["-m", "pkg.train", "x"], {}).command,
                         [sys.executable, "-u", "-m", "pkg.train", "x"])
        self.assertEqual(options.parse(["--no_python", "/bin/prog", "x"], {}).command,
                         ["/bin/prog", "x"])

    def test_r2sps_options_reach_the_processes_flags(self):
        p = plan("--sync=r2sp", "--servers=3", "--hetero_batching", "--push_codec=fp16",
                 "--rdzv_id=job 7", "--worker_flags=--epochs=2", "--scheduler_flags=--x=1")
        self.assertEqual((p.sync, p.servers), ("r2sp", 3))
        self.assertEqual(p.scheduler_flags, "--x=1 --hetero_batching --job_id='job 7'")
        self.assertEqual(p.worker_flags, "--epochs=2 --push_codec=fp16")
        p = plan("--auth=curve", "--keys_dir=keys")
        self.assertEqual((p.auth, p.keys_dir), ("curve", os.path.abspath("keys")))

    def test_the_environment_gives_the_nodes_pet_first_then_pytorchjob_then_slurm(self):
        slurm = {"SLURM_NNODES": "4", "SLURM_NODEID": "3", "SLURM_JOB_NODELIST": "gpu[07-10]"}
        p = plan(environ=slurm)
        self.assertEqual((p.nnodes, p.node_rank, p.master_addr), (4, 3, "gpu07"))
        pod = {"MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2",
               "RANK": "1"}
        p = plan(environ=dict(slurm, **pod))
        self.assertEqual((p.nnodes, p.node_rank, p.master_addr, p.master_port),
                         (2, 1, "job-master-0", 23456))
        pet = {"PET_NNODES": "5", "PET_NODE_RANK": "4", "PET_NPROC_PER_NODE": "2",
               "PET_MASTER_ADDR": "m", "PET_MASTER_PORT": "9", "PET_MAX_RESTARTS": "1"}
        p = plan(environ=dict(slurm, **pod, **pet))
        self.assertEqual((p.nnodes, p.node_rank, p.nproc_per_node, p.master_addr,
                          p.master_port, p.max_restarts), (5, 4, 2, "m", 9, 1))
        p = plan("--node_rank=0", environ=pet)  # the command line wins
        self.assertEqual((p.nnodes, p.node_rank), (5, 0))
        self.assertEqual(plan(environ={"SLURM_NNODES": "2", "SLURM_NODEID": "1",
                                       "SLURM_JOB_NODELIST": "a1,b2"}).master_addr, "a1")
        p = plan("--standalone", environ=pet)  # one node on loopback, whatever is set
        self.assertEqual((p.nnodes, p.node_rank, p.master_addr), (1, 0, "127.0.0.1"))

    def test_bad_command_lines(self):
        self.assertUsage("--nnodes=1:4: an elastic range is not taken; R2SP's workers join "
                         "and leave a running job by themselves, so give --nnodes=N",
                         "--nnodes=1:4")
        self.assertUsage("--nnodes=0: want a whole number of at least 1", "--nnodes=0")
        self.assertUsage("--nnodes=two: want a whole number of at least 1", "--nnodes=two")
        self.assertUsage("--node_rank=2 is not a node of --nnodes=2", "--nnodes=2",
                         "--node_rank=2")
        self.assertUsage("--nproc_per_node=0: want a whole number of at least 1",
                         "--nproc_per_node=0")
        self.assertUsage("--master_port=70000: not a port (1 to 65535)", "--master_port=70000")
        self.assertUsage("--standalone is one node: leave --nnodes out or give 1",
                         "--standalone", "--nnodes=2")
        self.assertUsage("--rdzv_backend=etcd: static or c10d", "--rdzv_backend=etcd")
        self.assertUsage("--max_restarts=-1: want a whole number of at least 0",
                         "--max_restarts=-1")
        self.assertUsage("--no_python and --module do not go together", "--no_python", "-m")
        self.assertUsage("--auth=curve needs --keys_dir=DIR, the job's keys every node reads "
                         "(make them with tools/keygen DIR)", "--auth=curve")
        self.assertUsage("--keys_dir needs --auth=curve", "--keys_dir=/k")
        missing = os.path.join(tempfile.gettempdir(), "no_such_train.py")
        self.assertUsage(f"{missing}: no such file (the training script)", script=missing)
        self.assertUsage("SLURM_JOB_NODELIST='[': cannot read its first host",
                         environ={"SLURM_NNODES": "1", "SLURM_NODEID": "0",
                                  "SLURM_JOB_NODELIST": "["})


if __name__ == "__main__":
    junit_main.main()

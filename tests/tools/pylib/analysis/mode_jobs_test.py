"""tools/pylib/analysis/mode_jobs.py: each configuration's tools/launch or tools/netcluster
command line (modes, codecs, variants, Python workers, a PyTorch script through r2sp and under
DDP), the worker column's labels, and running and checking a job (subprocess stood in)."""

import contextlib
import io
import json
import os
import tempfile
import types
import unittest
from unittest import mock

import junit_main
from pylib.analysis import configurations as cfg
from pylib.analysis import mode_jobs


class JobCommandTest(unittest.TestCase):
    ARGS = dict(net="", scheduler_flags="", global_batch=256, servers=1, workers=4,
                server_flags="--lr=0.01", worker_flags="--model=mlp", timeout=60.0,
                worker_flags_for=[], bin_dir="", out="/tmp/out", pull_codec="auto",
                variants={"early": "--early_pulls"})

    def command(self, mode, **more):
        return mode_jobs.job_command(types.SimpleNamespace(**dict(self.ARGS, **more)), mode, "/tmp/out/x")

    def test_loopback(self):
        cmd = self.command("bsp")
        self.assertTrue(cmd[1].endswith("tools/launch"))
        self.assertIn("--sync=bsp", cmd)
        self.assertIn("--run_dir=/tmp/out/x", cmd)
        self.assertIn("--quiet", cmd)
        self.assertFalse(any(a.startswith("--scheduler_flags") for a in cmd))
        self.assertFalse(any(a.startswith("--bin_dir") for a in cmd))

    def test_auth_is_passed_on(self):
        self.assertIn("--auth=curve", self.command("bsp", auth="curve"))
        self.assertFalse([a for a in self.command("bsp", auth="none") if a.startswith("--auth")])
        self.assertFalse([a for a in self.command("bsp") if a.startswith("--auth")])

    def test_python_workers_are_passed_on(self):
        cmd = self.command("bsp", worker_cmd="python3 t.py --x='a b'",
                           worker_cmd_for=["1,3:python3 u.py", "2:./v"])
        self.assertEqual(cmd[-3:], ["--worker_cmd=python3 t.py --x='a b'",
                                    "--worker_cmd_for=1,3:python3 u.py", "--worker_cmd_for=2:./v"])
        self.assertFalse([a for a in self.command("bsp") if a.startswith("--worker_cmd")])

    def test_netcluster_options_come_first(self):
        cmd = self.command("asp", net="--server_link=100mbit --delay_ms=1")
        self.assertTrue(cmd[1].endswith("tools/netcluster"))
        self.assertEqual(cmd[2:4], ["--server_link=100mbit", "--delay_ms=1"])

    def test_mode_flags_join_the_scheduler_flags(self):
        cmd = self.command("r2sp_hetero", scheduler_flags="--partition_bytes=4096", global_batch=64)
        self.assertIn("--sync=r2sp", cmd)
        self.assertIn("--scheduler_flags=--partition_bytes=4096 --hetero_batching --global_batch=64", cmd)
        self.assertIn("--scheduler_flags=--staleness=3", self.command("ssp"))
        cmd = self.command("r2sp_auto+fp16")
        self.assertIn("--sync=r2sp", cmd)
        self.assertIn("--scheduler_flags=--r2sp_slot_width=auto", cmd)

    def test_elastic_modes_give_the_workers_the_servers_sgd_flags(self):
        cmd = self.command("easgd", server_flags="--lr=0.05 --momentum 0.5 --weight_decay=1e-4 "
                                                 "--apply_threads=2")
        self.assertIn("--sync=easgd", cmd)
        self.assertIn("--worker_flags=--model=mlp --lr=0.05 --momentum=0.5 --weight_decay=1e-4",
                      cmd)
        self.assertFalse([a for a in cmd if a.startswith("--scheduler_flags")])
        cmd = self.command("eawild+fp16")
        self.assertIn("--sync=eawild", cmd)
        self.assertIn("--worker_flags=--model=mlp --lr=0.01 --push_codec=fp16 --pull_codec=fp16",
                      cmd)
        self.assertIn("--worker_flags=--model=mlp", self.command("asp"))  # not elastic

    def test_eawild_hetero_is_eawild_with_hetero_batching_and_the_local_sgd(self):
        cmd = self.command("eawild_hetero", server_flags="--lr=0.05", global_batch=128)
        self.assertIn("--sync=eawild", cmd)
        self.assertIn("--scheduler_flags=--hetero_batching --global_batch=128", cmd)
        self.assertIn("--worker_flags=--model=mlp --lr=0.05", cmd)

    def test_codec_suffix_adds_the_worker_codec_flags(self):
        cmd = self.command("r2sp+fp16")
        self.assertIn("--sync=r2sp", cmd)
        self.assertIn("--worker_flags=--model=mlp --push_codec=fp16 --pull_codec=fp16", cmd)
        self.assertIn("--worker_flags=--model=mlp", self.command("r2sp"))
        self.assertIn("--worker_flags=--model=mlp --push_codec=fp32 --pull_codec=fp32",
                      self.command("bsp+fp32"))

    def test_sparse_codecs_push_sparse_and_pull_fp32(self):
        cmd = self.command("r2sp+topk:0.01")
        self.assertIn("--sync=r2sp", cmd)
        self.assertIn("--worker_flags=--model=mlp --push_codec=topk:0.01 --pull_codec=fp32", cmd)
        self.assertIn("--worker_flags=--model=mlp --push_codec=csc:0.05,fp16,chunk=4096 "
                      "--pull_codec=fp32", self.command("bsp+csc:0.05,fp16,chunk=4096"))
        self.assertIn("--scheduler_flags=--staleness=3", self.command("ssp+topk:0.01,exact"))

    def test_pull_codec_overrides_the_codec_runs_pulls_only(self):
        self.assertIn("--worker_flags=--model=mlp --push_codec=topk:0.01 --pull_codec=fp16",
                      self.command("bsp+topk:0.01", pull_codec="fp16"))
        self.assertIn("--worker_flags=--model=mlp --push_codec=fp16 --pull_codec=fp32",
                      self.command("bsp+fp16", pull_codec="fp32"))
        self.assertIn("--worker_flags=--model=mlp", self.command("bsp", pull_codec="fp16"))

    def test_variant_adds_its_worker_flags(self):
        self.assertIn("--worker_flags=--model=mlp --early_pulls", self.command("r2sp@early"))
        self.assertIn("--sync=r2sp", self.command("r2sp@early"))
        self.assertIn("--worker_flags=--model=mlp --push_codec=fp16 --pull_codec=fp16 "
                      "--early_pulls", self.command("bsp+fp16@early"))
        self.assertEqual(cfg.split_modes("bsp,r2sp@early", str.lower), ["bsp", "r2sp@early"])
        self.assertEqual(cfg.split_modes("bsp;bsp+TopK:0.01,fp16@early", str.lower),
                         ["bsp", "bsp+topk:0.01,fp16@early"])
        with self.assertRaisesRegex(ValueError, r"^bad variant name 'bad name' in 'r2sp@bad name' "):
            cfg.split_variant("r2sp@bad name")
        self.assertEqual(cfg.mode_codec_names(["r2sp@early"], ["fp32", "fp16"]),
                         ["r2sp@early", "r2sp+fp16@early"])
        self.assertEqual(cfg.parse_variant("early=--early_pulls --threads=1"),
                         ("early", "--early_pulls --threads=1"))
        with self.assertRaisesRegex(ValueError, r"^--variant=no flags: want NAME=FLAGS"):
            cfg.parse_variant("no flags")

    def test_scheduler_and_server_variants_add_their_roles_flags(self):
        more = dict(scheduler_variants={"w2": "--r2sp_slot_width=2", "both": "--x=1"},
                    server_variants={"a1": "--apply_threads=1", "both": "--y=2"})
        cmd = self.command("r2sp@w2", **more)
        self.assertIn("--scheduler_flags=--r2sp_slot_width=2", cmd)
        self.assertIn("--server_flags=--lr=0.01", cmd)
        self.assertIn("--worker_flags=--model=mlp", cmd)
        # After the mode's own flags: r2sp_auto's width is overridden, not the variant's.
        self.assertIn("--scheduler_flags=--r2sp_slot_width=auto --r2sp_slot_width=2",
                      self.command("r2sp_auto@w2", **more))
        cmd = self.command("bsp@a1", scheduler_flags="--log_every=5", **more)
        self.assertIn("--server_flags=--lr=0.01 --apply_threads=1", cmd)
        self.assertIn("--scheduler_flags=--log_every=5", cmd)
        cmd = self.command("r2sp@both", **more)
        self.assertIn("--scheduler_flags=--x=1", cmd)
        self.assertIn("--server_flags=--lr=0.01 --y=2", cmd)
        self.assertIn("--worker_flags=--model=mlp", cmd)
        # A worker variant of the same name adds its flags too.
        cmd = self.command("r2sp@early", server_variants={"early": "--apply_threads=2"})
        self.assertIn("--worker_flags=--model=mlp --early_pulls", cmd)
        self.assertIn("--server_flags=--lr=0.01 --apply_threads=2", cmd)
        with self.assertRaisesRegex(ValueError, r"^--server_variant=a1: want NAME=FLAGS"):
            cfg.parse_variant("a1", "--server_variant")

    def test_split_mode(self):
        self.assertEqual(cfg.split_mode("bsp"), ("bsp", None))
        self.assertEqual(cfg.split_mode("r2sp_hetero+fp16"), ("r2sp_hetero", "fp16"))
        self.assertEqual(cfg.split_mode("r2sp+topk:0.01,fp16"), ("r2sp", "topk:0.01,fp16"))
        # The codec as spelt (split_modes had the worker spell it).
        self.assertEqual(cfg.split_mode("bsp+csc:0.05,chunk=4096"), ("bsp", "csc:0.05,chunk=4096"))
        with self.assertRaisesRegex(ValueError, r"^unknown mode fast$"):
            cfg.split_mode("fast+fp16")

    def test_per_worker_flags_and_binaries(self):
        cmd = self.command("bsp", worker_flags_for=["3:--compute_slowdown=2"], bin_dir="/b")
        self.assertIn("--worker_flags_for=3:--compute_slowdown=2", cmd)
        self.assertIn("--bin_dir=/b", cmd)


class ScriptJobsTest(unittest.TestCase):
    """--script: the R2SP configurations run it through the r2sp client, ddp under DDP."""
    ARGS = dict(JobCommandTest.ARGS, script="ex/t.py", script_flags="--threads=1",
                python="/usr/bin/python3", worker_cmd="", worker_cmd_for=[],
                worker_flags="--batch_size=32 --epochs=2 --emulate_ms_per_sample=4 --model=cnn",
                server_flags="--lr=0.05 --momentum=0.9",
                worker_flags_for=["3:--emulate_ms_per_sample=8", "1:--compute_slowdown=2"])

    def command(self, mode, **more):
        return mode_jobs.job_command(types.SimpleNamespace(**dict(self.ARGS, **more)), mode,
                                     "/tmp/out/x")

    def test_r2sp_configurations_run_the_script_through_the_client(self):
        cmd = self.command("r2sp+fp16")
        # The servers apply the script's SGD: it takes the servers' rate and momentum.
        self.assertIn("--worker_cmd=/usr/bin/python3 ex/t.py --threads=1 --lr=0.05 "
                      "--momentum=0.9", cmd)
        self.assertIn("--worker_flags=--batch_size=32 --epochs=2 --emulate_ms_per_sample=4 "
                      "--model=cnn --push_codec=fp16 --pull_codec=fp16", cmd)
        self.assertIn("--worker_flags_for=1:--compute_slowdown=2", cmd)

    def test_ddp_runs_the_script_with_the_same_settings(self):
        cmd = self.command("ddp")
        self.assertTrue(cmd[1].endswith("tools/launch"))
        self.assertEqual(cmd[2:], [
            "--run_dir=/tmp/out/x", "--servers=1", "--workers=4", "--timeout=60.0", "--quiet",
            "--ddp_cmd=/usr/bin/python3 ex/t.py --threads=1 --backend=ddp --ddp_comm_hook=none",
            "--worker_flags=--batch_size=32 --epochs=2 --emulate_ms_per_sample=4 --lr=0.05 "
            "--momentum=0.9",
            "--worker_flags_for=3:--emulate_ms_per_sample=8"])

    def test_ddp_trains_the_r2sp_jobs_batches_with_the_same_extension(self):
        cmd = self.command("ddp", ddp_data_order="r2sp", bin_dir="/b")
        self.assertEqual(cmd[7:], [
            "--ddp_cmd=/usr/bin/python3 ex/t.py --threads=1 --backend=ddp --ddp_comm_hook=none "
            "--data_order=r2sp",
            "--worker_flags=--batch_size=32 --epochs=2 --emulate_ms_per_sample=4 --lr=0.05 "
            "--momentum=0.9",
            "--worker_flags_for=3:--emulate_ms_per_sample=8", "--bin_dir=/b"])

    def test_ddp_fp16_on_the_emulated_cluster_with_a_variant(self):
        cmd = self.command("ddp+fp16@slow", net="--colocate --worker_link=1gbit",
                           variants={"slow": "--emulate_ms_per_sample=6"})
        self.assertTrue(cmd[1].endswith("tools/netcluster"))
        self.assertEqual(cmd[2:4], ["--colocate", "--worker_link=1gbit"])
        self.assertIn("--ddp_cmd=/usr/bin/python3 ex/t.py --threads=1 --backend=ddp "
                      "--ddp_comm_hook=fp16", cmd)
        self.assertIn("--worker_flags=--batch_size=32 --epochs=2 --emulate_ms_per_sample=6 "
                      "--lr=0.05 --momentum=0.9", cmd)

    def test_ddp_needs_a_script(self):
        with self.assertRaisesRegex(ValueError, r"^ddp: a DDP configuration runs a PyTorch "
                                                r"script: give --script$"):
            self.command("ddp", script="")

    def test_worker_labels(self):
        def label(mode, **more):
            return mode_jobs.worker_label(types.SimpleNamespace(**more), mode)
        self.assertEqual(label("ddp+fp16", script="t.py"), "DDP (script)")
        self.assertEqual(label("bsp", script="t.py"), "r2sp client (script)")
        self.assertEqual(label("bsp", worker_cmd="python3 t.py"), "r2sp client (--worker_cmd)")
        self.assertEqual(label("bsp", worker_cmd_for=["1:python3 t.py"]),
                         "mixed (--worker_cmd_for)")
        self.assertEqual(label("r2sp"), "C++ worker")


class RunModeTest(unittest.TestCase):
    def test_run_directory_spells_the_codec_with_underscores(self):
        args = types.SimpleNamespace(**dict(JobCommandTest.ARGS, out="/tmp/out"))
        done = types.SimpleNamespace(returncode=0, stdout="", stderr="")
        with mock.patch.object(mode_jobs.subprocess, "run", return_value=done) as run, \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            run_dir = mode_jobs.run_mode(args, "r2sp+csc:0.05,chunk=4096", "_run2")
        self.assertEqual(run_dir, "/tmp/out/r2sp+csc_0.05_chunk_4096_run2")
        self.assertIn("--run_dir=/tmp/out/r2sp+csc_0.05_chunk_4096_run2", run.call_args[0][0])
        self.assertIn("compare_modes: r2sp+csc:0.05,chunk=4096_run2 ...", printed.getvalue())

    def test_a_failed_job_or_a_lost_process_fails_the_run(self):
        with tempfile.TemporaryDirectory() as run_dir:
            ok = types.SimpleNamespace(returncode=0, stdout="", stderr="")
            mode_jobs.check_job(ok, "bsp", run_dir)  # no summary.json: load() will say so
            with self.assertRaisesRegex(mode_jobs.JobError, "bsp failed:\nout err"):
                mode_jobs.check_job(types.SimpleNamespace(returncode=1, stdout="out ", stderr="err"),
                             "bsp", run_dir)
            events = [{"t": 1.0, "process": "worker1", "event": "died", "status": -9},
                      {"t": 1.1, "process": "worker1.r1", "event": "restarted", "status": -9},
                      {"t": 9.0, "process": "server0", "event": "stopped", "status": -15}]
            with open(os.path.join(run_dir, "summary.json"), "w") as f:
                json.dump({"completed": True, "events": events[2:]}, f)
            mode_jobs.check_job(ok, "bsp", run_dir)  # stopped after the scheduler ended: no death
            with open(os.path.join(run_dir, "summary.json"), "w") as f:
                json.dump({"completed": True, "events": events}, f)
            with self.assertRaisesRegex(mode_jobs.JobError, r"bsp: worker1 \(status -9\) died during "
                                                     r"the run, so its figures do not compare"):
                mode_jobs.check_job(ok, "bsp", run_dir)


if __name__ == "__main__":
    junit_main.main()

"""r2sp.torch against real jobs: the scheduler and server binaries and Python workers running
tiny_train.py or known_train.py through the built extension. Two workers train a tiny model in
bsp to completion and end with the same parameters, worker 0's initial ones having become
everyone's; with the known gradients, torch workers alone and beside a C++ worker end with the
C++ workers' parameters bit for bit; the bad inputs (a float64 or
non-contiguous parameter, no scheduler, an unknown flag, another model than the job's) each
raise their exact error. Workers get the ranks RANK asks for, whatever the order they register
in, and know them (and WORLD_SIZE) from init() on; a rank the job does not have, or one another
worker asked for, is refused by the scheduler. Also asp, r2sp with --overlap and fp16 pushes,
hetero batching (the sampler follows the tuned batches; in eawild too), a worker killed mid-epoch (the survivor
trains its samples from the next epoch), batch-norm statistics (each worker's own, the evaluating
worker's saved), Ctrl-C, a server lost mid-step (JobLost), and
tools/launch --worker_cmd (the reported accuracy reaches summary.json). Skipped where the
binaries are not built."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import job_harness
import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import torch  # noqa: E402

    import r2sp.torch as r2t  # noqa: E402
    from r2sp.torch import state  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_train.py")
KNOWN = os.path.join(os.path.dirname(SCRIPT), "known_train.py")


def cannot_run():
    return SKIP or job_harness.cannot_run()


class Job(job_harness.Job):
    """A job_harness.Job (scheduler with a 1 s heartbeat timeout, one server) in `sync` mode
    whose Python workers run tiny_train.py."""

    def __init__(self, workers, sync="bsp", register_timeout_s=60, scheduler_flags=(),
                 server_flags=()):
        super().__init__("r2sp_torch", workers,
                         scheduler_flags=["--sync=" + sync,
                                          f"--register_timeout_s={register_timeout_s}",
                                          *scheduler_flags],
                         server_flags=["--lr=0.1", "--momentum=0.9", *server_flags])

    def torch_worker(self, index, flags, *args, hidden=8, step_sleep=0.0, script=SCRIPT,
                     torchrun=False, script_env=None):
        """tiny_train.py (or `script`) as worker `index` (RANK) with these worker flags, a
        hidden layer this wide and steps this much longer per sample; its output in
        worker<index>.json. `torchrun`: the scheduler's address in MASTER_ADDR and MASTER_PORT
        instead of R2SP_SCHEDULER. `script_env`: more variables for the script."""
        address = {"R2SP_SCHEDULER": self.endpoint}
        if torchrun:
            host, port = self.endpoint[len("tcp://"):].rsplit(":", 1)
            address = {"MASTER_ADDR": host, "MASTER_PORT": port, "WORLD_SIZE": "2"}
        env = dict({k: v for k, v in os.environ.items() if k != "R2SP_SCHEDULER"}, **address,
                   RANK=str(index),
                   TINY_HIDDEN=str(hidden), TINY_STEP_SLEEP=str(step_sleep),
                   R2SP_WORKER_FLAGS="--bind=tcp://127.0.0.1:* " + " ".join(job_harness.NODE)
                   + " " + flags,
                   R2SP_CORE=r2sp_testing.core_path(),
                   PYTHONPATH=os.path.join(r2sp_testing.ROOT, "worker", "python"),
                   TINY_OUT=self.path(f"worker{index}.json"))
        env.update(script_env or {})
        return self.python_worker(f"worker{index}", script, args, env=env)

    def result(self, index):
        with open(self.path(f"worker{index}.json")) as f:
            return json.load(f)


@unittest.skipIf(cannot_run(), cannot_run() or "")
class TrainingTest(unittest.TestCase):
    def test_two_python_workers_train_in_bsp_to_the_same_parameters(self):
        job = Job(workers=2)
        self.addCleanup(job.close)
        workers = [job.torch_worker(i, "--epochs=2 --batch_size=8 --seed=3", "2",
                                    torchrun=i == 1)  # torchrun's variables for worker 1
                   for i in range(2)]
        for i, w in enumerate(workers):
            self.assertEqual(w.wait(timeout=120), 0, job.log(f"worker{i}"))
        a, b = job.result(0), job.result(1)
        self.assertEqual(sorted([a["rank"], b["rank"]]), [0, 1])
        self.assertEqual((a["size"], a["mode"], b["size"], b["mode"]), (2, "bsp", 2, "bsp"))
        # 64 samples in 2 shards of 32: 4 steps of 8 per epoch, 2 epochs.
        for r in (a, b):
            self.assertEqual(r["batches"], [8] * 8)
            self.assertEqual({k: r["finish"][k] for k in ("steps", "samples", "epochs")},
                             {"steps": 8, "samples": 64, "epochs": 2})
        first = a if a["rank"] == 0 else b
        self.assertEqual(a["joined"], first["initial"])
        self.assertEqual(b["joined"], first["initial"])
        self.assertNotEqual(a["initial"], b["initial"])
        self.assertEqual(a["final"], b["final"])
        self.assertEqual(len(a["final"]), 4 * 8 + 8 + 8 * 2 + 2)
        self.assertNotEqual(a["final"], a["joined"])
        for epoch in range(2):  # the shards split the data set
            self.assertEqual(sorted(a["epochs"][epoch] + b["epochs"][epoch]), list(range(64)))
            self.assertEqual(len(a["epochs"][epoch]), 32)
        self.assertEqual(a["asked"], a["batches"])
        evaluator, other = (a, b) if a["evals"] else (b, a)
        self.assertEqual([reported for _, reported in evaluator["evals"]], [True, True])
        self.assertEqual(other["evals"], [])
        self.assertEqual(evaluator["finish"]["test_accuracy"], evaluator["evals"][-1][0])

    def test_batch_norm_statistics_are_each_workers_and_the_evaluated_ones_are_saved(self):
        job = Job(workers=2)
        self.addCleanup(job.close)
        workers = [job.torch_worker(i, "--epochs=2 --batch_size=8", "2",
                                    script_env={"TINY_BATCH_NORM": "1"}) for i in range(2)]
        self.assertEqual(job.wait(workers), [0, 0], job.log("worker0") + job.log("worker1"))
        a, b = job.result(0), job.result(1)
        self.assertEqual(a["final"], b["final"])  # the parameters (BatchNorm's affine too)
        self.assertEqual(len(a["final"]), 4 * 8 + 8 + 8 + 8 + 8 * 2 + 2)
        names = ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
        self.assertEqual(len(a["evaluated_buffers"]), 2)  # worker 0 evaluates after each epoch
        self.assertNotIn("evaluated_buffers", b)
        for r in (a, b):  # each worker's statistics count its own 8 batches
            self.assertEqual(r["saved"]["1.num_batches_tracked"], [8])
        self.assertEqual(a["evaluated_buffers"][0]["1.num_batches_tracked"], [4])
        # Worker 0 evaluated with its own statistics, the ones its state_dict() saves with the
        # servers' parameters; worker 1's differ (other batches).
        self.assertEqual(sorted(a["evaluated_buffers"][-1]), sorted(names))
        for name in names:
            self.assertEqual(a["saved"][name], a["evaluated_buffers"][-1][name])
        self.assertNotEqual(a["saved"]["1.running_mean"], b["saved"]["1.running_mean"])
        saved_params = [v for k, v in a["saved"].items() if k not in names]
        self.assertEqual([x for v in saved_params for x in v], a["final"])

    def test_workers_get_the_ranks_they_ask_for_and_know_them_from_init(self):
        # RANK=1 registers first and is still worker 1: its shard is 1 and worker 0's (RANK=0,
        # registered second) initial parameters become everyone's. rank() and size() said so
        # right after init(), before the optimizer joined.
        job = Job(workers=2)
        self.addCleanup(job.close)
        size = {"WORLD_SIZE": "2"}
        first = job.torch_worker(1, "--epochs=1 --batch_size=8", "1", script_env=size)
        self.wait_for(lambda: "1/2 workers" in job.log("scheduler"), job)
        second = job.torch_worker(0, "--epochs=1 --batch_size=8", "1", script_env=size)
        self.assertEqual(job.wait([first, second]), [0, 0],
                         job.log("worker0") + job.log("worker1"))
        zero, one = job.result(0), job.result(1)
        self.assertEqual((zero["before"], zero["rank"], zero["size"]), ([0, 2], 0, 2))
        self.assertEqual((one["before"], one["rank"], one["size"]), ([1, 2], 1, 2))
        self.assertEqual(sorted(zero["epochs"][0]), list(range(0, 64, 2)))
        self.assertEqual(sorted(one["epochs"][0]), list(range(1, 64, 2)))
        self.assertEqual(one["joined"], zero["initial"])
        self.assertNotEqual(one["initial"], zero["initial"])
        self.assertRegex(job.log("scheduler"), r"worker registered from tcp://127\.0\.0\.1:\d+ "
                         r"asking for rank 1 \([01]/1 servers, 1/2 workers\)")

    def test_a_rank_out_of_range_or_asked_for_twice_is_refused_by_the_scheduler(self):
        job = Job(workers=2)
        self.addCleanup(job.close)
        flags = "--epochs=1 --batch_size=8"
        # RANK without WORLD_SIZE: only the scheduler knows the job's size.
        beyond = job.torch_worker(2, flags, "1")
        self.assertEqual(job.wait([beyond]), [3], job.log("worker2"))
        self.assertEqual(job.result(2)["error"], [
            "R2SPError", "INVALID_ARGUMENT", "cannot join the job: registration refused: this "
            "worker asks for rank 2, but the job has 2 workers (ranks 0 to 1)"])
        first = job.torch_worker(0, flags, "1")
        self.wait_for(lambda: "1/2 workers" in job.log("scheduler"), job)
        twice = job.torch_worker(1, flags, "1", script_env={"RANK": "0"})
        self.assertEqual(job.wait([twice]), [3], job.log("worker1"))
        kind, code, message = job.result(1)["error"]
        self.assertEqual((kind, code), ("R2SPError", "FAILED_PRECONDITION"))
        self.assertRegex(message, r"^cannot join the job: registration refused: this worker asks "
                         r"for rank 0, which the worker registered from "
                         r"tcp://127\.0\.0\.1:\d+ asked for already$")
        self.assertIsNone(first.poll())  # still waiting for a second worker

    def test_asp_and_r2sp_with_overlap_and_fp16_pushes(self):
        for sync, flags in (("asp", ""), ("r2sp", "--overlap --push_codec=fp16")):
            with self.subTest(sync=sync):
                job = Job(workers=2, sync=sync)
                self.addCleanup(job.close)
                workers = [job.torch_worker(i, "--epochs=1 --batch_size=8 " + flags, "1")
                           for i in range(2)]
                for i, w in enumerate(workers):
                    self.assertEqual(w.wait(timeout=120), 0, job.log(f"worker{i}"))
                for i in range(2):
                    r = job.result(i)
                    self.assertEqual((r["mode"], r["batches"]), (sync, [8] * 4))
                    self.assertEqual({k: r["finish"][k] for k in ("steps", "samples", "epochs")},
                                     {"steps": 4, "samples": 32, "epochs": 1})
                    self.assertNotEqual(r["final"], r["joined"])

    def test_survivors_train_a_killed_workers_samples_from_the_next_epoch(self):
        self.check_a_killed_worker()

    def test_with_dataloader_workers_survivors_train_a_killed_workers_samples(self):
        self.check_a_killed_worker({"TINY_LOADER_WORKERS": "2"})

    def check_a_killed_worker(self, script_env=None):
        """Worker 1 killed (SIGKILL) in its first epoch: worker 0 trains its own shard, then
        the whole data set in the second epoch."""
        job = Job(workers=2, scheduler_flags=["--absorb_orphaned_shards"])
        self.addCleanup(job.close)
        progress = os.path.join(job.dir, "worker1.json.steps")
        flags = "--epochs=2 --batch_size=8 "
        survivor = job.torch_worker(0, flags, "2", step_sleep=0.025, script_env=script_env)
        doomed = job.torch_worker(1, flags, "2", step_sleep=0.025, script_env=script_env)
        deadline = time.monotonic() + 60
        while not (os.path.exists(progress) and open(progress).read() not in ("", "0")):
            self.assertLess(time.monotonic(), deadline, job.log("worker1"))
            time.sleep(0.05)
        doomed.kill()
        self.assertEqual(survivor.wait(timeout=120), 0, job.log("worker0"))
        r = job.result(0)
        # Epoch 1: its own shard (4 steps, clocked with the doomed worker's first); epoch 2: the
        # whole data set, the dead worker's shard dealt to it by the scheduler's plan.
        shard = r["epochs"][0][0] % 2
        self.assertEqual(sorted(r["epochs"][0]), list(range(shard, 64, 2)))
        self.assertEqual(sorted(r["epochs"][1]), list(range(64)))
        self.assertEqual(r["batches"], [8] * 12)
        self.assertEqual({k: r["finish"][k] for k in ("steps", "samples", "epochs")},
                         {"steps": 12, "samples": 96, "epochs": 2})
        self.assertRegex(job.log("scheduler"),
                         f"worker {1 - r['rank']} at tcp://127.0.0.1:[0-9]+ declared dead")

    def test_eawild_hetero_batching_tunes_the_python_workers_batches(self):
        # Elastic averaging weights each difference by its batch in the C++ exchange
        # (elastic_exchange_test); here the Python client's tuned batches reach the script.
        job, tuned = self.hetero_pair(sync="eawild", flags=["--elastic_period=2"])
        results = {r["rank"]: r for r in (job.result(0), job.result(1))}
        for r in results.values():
            self.assertEqual(len(r["batches"]), 12)
            self.assertEqual(r["asked"], r["batches"])
            self.assertEqual(r["finish"]["samples"], sum(r["batches"]))
        slow_rank = job.result(1)["rank"]
        self.assertLess(tuned[-1][slow_rank], tuned[-1][1 - slow_rank], tuned)

    def hetero_pair(self, flags=(), script_env=None, **job_options):
        """Two torch workers with hetero batching (B = 16), worker 1 ten times slower, to their
        end; the job and the scheduler's tunings [(w0, w1)], which always sum to B."""
        job = Job(workers=2, scheduler_flags=["--hetero_batching", "--global_batch=16",
                                              "--min_batch=2", *flags], **job_options)
        self.addCleanup(job.close)
        fast = job.torch_worker(0, "--epochs=3 --batch_size=8", "3", step_sleep=0.001,
                                script_env=script_env)
        slow = job.torch_worker(1, "--epochs=3 --batch_size=8", "3", step_sleep=0.01,
                                script_env=script_env)
        self.assertEqual(fast.wait(timeout=120), 0, job.log("worker0"))
        self.assertEqual(slow.wait(timeout=120), 0, job.log("worker1"))
        tuned = [(int(a), int(b)) for a, b in
                 re.findall(r"batch sizes: w0=(\d+) w1=(\d+)", job.log("scheduler"))]
        self.assertTrue(tuned, job.log("scheduler"))
        self.assertEqual({a + b for a, b in tuned}, {16})
        return job, tuned

    def test_hetero_batching_gives_the_slower_worker_the_smaller_batch(self):
        job, tuned = self.hetero_pair()
        results = [job.result(0), job.result(1)]
        for r in results:
            # An epoch is the data set in global batches: 64 / 16 = 4 steps; each step's batch
            # is the one batch_size() gave, a tuned one by the end (a worker may finish before
            # the scheduler's last tuning reaches it).
            self.assertEqual(len(r["batches"]), 12)
            self.assertEqual(r["asked"], r["batches"])
            self.assertEqual(r["batches"][-1], r["finish"]["final_batch"])
            self.assertIn(r["batches"][-1], {t[r["rank"]] for t in tuned})
            self.assertEqual(r["finish"]["samples"], sum(r["batches"]))
            for epoch, indices in enumerate(r["epochs"]):
                self.assertEqual(len(indices), sum(r["batches"][4 * epoch:4 * epoch + 4]))
            # The shuffled passes over the shard's 32 samples run on across the epochs.
            stream = sum(r["epochs"], [])
            shard = list(range(stream[0] % 2, 64, 2))
            for start in range(0, len(stream), 32):
                one_pass = stream[start:start + 32]  # the last may be cut short
                self.assertEqual(len(set(one_pass)), len(one_pass))
                self.assertLessEqual(set(one_pass), set(shard))
        self.assertLess(results[1]["finish"]["final_batch"], results[0]["finish"]["final_batch"])

    def test_dataloader_workers_follow_the_tuned_batches_a_few_steps_late(self):
        # Batches asked ahead (2 loader workers, prefetch 2: up to 4 ahead) keep the size the
        # scheduler had given when asked; each step counts its own batch's samples.
        job, tuned = self.hetero_pair(script_env={"TINY_LOADER_WORKERS": "2"})
        results = [job.result(0), job.result(1)]
        for r in results:
            self.assertEqual(len(r["batches"]), 12)
            self.assertEqual(r["finish"]["samples"], sum(r["batches"]))
            self.assertEqual(r["finish"]["steps"], 12)
            for epoch, indices in enumerate(r["epochs"]):
                self.assertEqual(len(indices), sum(r["batches"][4 * epoch:4 * epoch + 4]))
            self.assertIn(r["batches"][-1], {t[r["rank"]] for t in tuned} | {8})
        # The job's batches (batch_size() at each step) follow the tuner at once: the slower
        # worker (1) ends with the smaller one.
        fast, slow = results
        self.assertLess(slow["asked"][-1], fast["asked"][-1], tuned)

    def test_ctrl_c_while_joining_and_while_training(self):
        job = Job(workers=2)
        self.addCleanup(job.close)
        flags = "--epochs=2 --batch_size=8"
        alone = job.torch_worker(0, flags, "2", step_sleep=0.025)
        self.wait_for(lambda: "1/2 workers" in job.log("scheduler"), job)
        alone.send_signal(signal.SIGINT)  # waiting in join() for a second worker
        self.assertEqual(alone.wait(timeout=10), 130, job.log("worker0"))
        self.assertTrue(job.log("worker0").endswith("interrupted\n"), job.log("worker0"))

        job = Job(workers=2)
        self.addCleanup(job.close)
        stopped = job.torch_worker(0, flags, "2", step_sleep=0.025)
        goes_on = job.torch_worker(1, flags, "2", step_sleep=0.025)
        progress = os.path.join(job.dir, "worker0.json.steps")
        self.wait_for(lambda: os.path.exists(progress) and open(progress).read() not in ("", "0"),
                      job)
        stopped.send_signal(signal.SIGINT)  # in a step: its compute, or a wait in the extension
        self.assertEqual(stopped.wait(timeout=10), 130, job.log("worker0"))
        # Interrupted in the extension, the worker has left the job; in the script's own code,
        # the finish at exit is refused (training is not over) and the worker leaves then.
        self.assertRegex(job.log("worker0"), "interrupted\n(r2sp: this worker left the job "
                         "without finishing: finish\\(\\) before the job's training was over: "
                         "it wants step [0-9]+ of 4 of epoch [12] \\(iterate "
                         "r2sp.torch.DistributedSampler to the end\\)\n)?$")
        # The other worker finishes the job alone (its own shard: 4 steps an epoch).
        self.assertEqual(goes_on.wait(timeout=60), 0, job.log("worker1"))
        self.assertEqual(job.result(1)["finish"]["steps"], 8)

    def wait_for(self, condition, job, seconds=60):
        deadline = time.monotonic() + seconds
        while not condition():
            self.assertLess(time.monotonic(), deadline, job.log("scheduler"))
            time.sleep(0.05)

    def test_through_tools_launch_the_reported_accuracy_reaches_the_summary(self):
        tmp = tempfile.TemporaryDirectory(prefix="r2sp_torch_launch_")
        self.addCleanup(tmp.cleanup)  # the launcher's run directory and the workers' outputs
        run_dir = os.path.join(tmp.name, "run")
        out = os.path.join(os.path.dirname(run_dir), "worker{rank}.json")
        launch = subprocess.run(
            [sys.executable, os.path.join(r2sp_testing.ROOT, "tools", "launch"),
             "--bin_dir=" + job_harness.BIN_DIR, "--quiet", "--run_dir=" + run_dir,
             "--servers=1", "--workers=2", "--sync=r2sp", "--server_flags=--lr=0.1",
             "--worker_flags=--epochs=2 --batch_size=8 --overlap",
             f"--worker_cmd={sys.executable} {SCRIPT} 2"],
            env=dict(os.environ, TINY_OUT=out), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=240)
        self.assertEqual(launch.returncode, 0, launch.stdout)
        results = [json.load(open(out.replace("{rank}", str(i)))) for i in range(2)]
        index = next(i for i, r in enumerate(results) if r["evals"])  # the launcher's
        evaluator = results[index]
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["completed"], summary["mode"], summary["workers"],
                          summary["iterations"], summary["epochs"], summary["events"]),
                         (True, "r2sp", 2, 8, 2, []))
        self.assertEqual(summary["final_test_accuracy"], evaluator["evals"][-1][0])
        evals = [json.loads(line) for line in open(os.path.join(
            run_dir, f"metrics_worker{index}.jsonl")) if '"eval"' in line]
        self.assertEqual([e["test_accuracy"] for e in evals],
                         [round(a, 6) for a, _ in evaluator["evals"]])
        with open(os.path.join(run_dir, "timeline.json")) as f:
            spans = {e["name"] for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}
        self.assertLessEqual({"compute", "push", "pull"}, spans)

    def test_known_gradients_give_the_cpp_workers_parameters_bit_for_bit(self):
        # 6 bsp steps of the known gradients: C++ workers, then torch workers, then a mix.
        synthetic = ["--model=synthetic", "--model_mb=0.015625", "--layers=2", "--grad=known",
                     "--init=zero", "--iterations=6"]
        finals = {}
        for name, kinds in (("cpp", "cc"), ("torch", "pp"), ("mixed", "cp")):
            job = Job(workers=2)
            self.addCleanup(job.close)
            procs = []
            for i, kind in enumerate(kinds):
                out = job.path(f"{kind}{i}.params")
                if kind == "c":
                    procs.append(job.cpp_worker(f"worker{i}", synthetic + ["--dump_params=" + out]))
                else:  # 48 samples in 2 shards of 24: 6 steps of 4
                    procs.append(job.torch_worker(i, "--batch_size=4", out, script=KNOWN))
            self.assertEqual(job.wait(procs), [0, 0], job.log("worker0") + job.log("worker1"))
            for i, kind in enumerate(kinds):
                with open(job.path(f"{kind}{i}.params"), "rb") as f:
                    finals[f"{name} {kind}{i}"] = f.read()
        expected = finals["cpp c0"]
        self.assertEqual(len(expected), 4096 * 4)
        self.assertNotEqual(expected, bytes(len(expected)))
        self.assertEqual(finals, {k: expected for k in finals})

    def test_staged_parameters_pulled_during_backward_give_the_cpp_workers_parameters(self):
        # The CUDA path's exchange on the CPU (known_train.py's KNOWN_DEVICE=staged): pulls
        # follow each partition's push while backward runs (--early_pulls with --overlap, 1 KiB
        # partitions so that there are 16), and the 6 bsp steps end bit for bit where C++
        # workers' do; also with the pulls behind a gate (g: --early_pulls_in_flight=1).
        synthetic = ["--model=synthetic", "--model_mb=0.015625", "--layers=2", "--grad=known",
                     "--init=zero", "--iterations=6", "--overlap"]
        gated = {"p": "", "g": " --early_pulls_in_flight=1"}
        finals = {}
        for kind in "cpg":
            job = Job(workers=2, scheduler_flags=["--partition_bytes=1024"])
            self.addCleanup(job.close)
            procs = []
            for i in range(2):
                out = job.path(f"{kind}{i}.params")
                if kind == "c":
                    procs.append(job.cpp_worker(f"worker{i}", synthetic + ["--dump_params=" + out]))
                else:
                    procs.append(job.torch_worker(
                        i, "--batch_size=4 --overlap --early_pulls --bucket_bytes=0" + gated[kind],
                        out, script=KNOWN, script_env={"KNOWN_DEVICE": "staged"}))
            self.assertEqual(job.wait(procs), [0, 0], job.log("worker0") + job.log("worker1"))
            for i in range(2):
                with open(job.path(f"{kind}{i}.params"), "rb") as f:
                    finals[f"{kind}{i}"] = f.read()
        self.assertNotEqual(finals["c0"], bytes(4096 * 4))
        self.assertEqual(finals, {k: finals["c0"] for k in "c0 c1 p0 p1 g0 g1".split()})

    def test_early_pulls_with_overlap_need_a_model_that_computes_on_a_copy(self):
        job = Job(workers=1)
        self.addCleanup(job.close)
        worker = job.torch_worker(0, "--batch_size=4 --overlap --early_pulls", job.path("p0"),
                                  script=KNOWN)
        self.assertEqual(job.wait([worker]), [1], job.log("worker0"))
        self.assertIn("--early_pulls (SessionOptions.exchange.early_pulls) does not go with "
                      "--overlap (backward still reads the parameters while --overlap pushes) "
                      "unless the compute reads a copy of them (the Python client's CUDA "
                      "models)", job.log("worker0"))

    def test_a_server_lost_mid_step_is_job_lost(self):
        job = Job(workers=2)
        self.addCleanup(job.close)
        workers = [job.torch_worker(i, "--epochs=2 --batch_size=8", "2", step_sleep=0.02)
                   for i in range(2)]
        progress = job.path("worker0.json.steps")
        self.wait_for(lambda: os.path.exists(progress) and open(progress).read() not in ("", "0"),
                      job)
        next(p for p in job.processes if p.name == "server0").kill()
        self.assertEqual(job.wait(workers, timeout=60), [4, 4],
                         job.log("worker0") + job.log("worker1"))
        for i in range(2):
            kind, code, message = job.result(i)["lost"]
            self.assertEqual((kind, code), ("JobLost", "ABORTED"))
            self.assertRegex(message, r"^the job failed: server 0 at tcp://[0-9.:]+ was lost "
                             r"\(silent for [0-9.]+s\); the job cannot go on without its shard: "
                             r"resume it from the servers' checkpoints \(tools/launch "
                             r"--resume=RUN_DIR\); bsp jobs do not replace servers$")

    def test_another_model_than_the_jobs(self):
        job = Job(workers=2, register_timeout_s=30)
        self.addCleanup(job.close)
        first = job.torch_worker(0, "--epochs=1 --batch_size=8", "1")
        self.wait_for(lambda: "1/2 workers" in job.log("scheduler"), job)  # the job's model
        other = job.torch_worker(1, "--epochs=1 --batch_size=8", "1", hidden=5)
        codes = (first.wait(timeout=120), other.wait(timeout=120))
        self.assertEqual(codes, (3, 3), job.log("scheduler"))
        self.assertEqual(job.result(1)["error"], [
            "R2SPError", "INVALID_ARGUMENT", "cannot join the job: registration refused: this "
            "worker's model differs from the one the first worker registered"])
        # Worker 0 is refused too once the job gives up waiting for a second worker.
        self.assertEqual(job.result(0)["error"], [
            "R2SPError", "FAILED_PRECONDITION", "cannot join the job: registration refused: "
            "not every node registered within 30s"])


@unittest.skipIf(cannot_run(), cannot_run() or "")
class BadInputTest(unittest.TestCase):
    """In this process, with the real extension: each refusal before or at joining."""

    SERVERS = ("the servers apply SGD with momentum, weight decay and the learning-rate "
               "schedule given by their flags (--lr, --momentum, --weight_decay, "
               "--warmup_updates, --lr_milestones, --lr_gamma)")

    def setUp(self):
        state.STATE.__init__()
        r2t.init(scheduler="tcp://127.0.0.1:9", register_wait_s=1)
        self.model = torch.nn.Linear(3, 2)

    def tearDown(self):
        state.STATE.__init__()

    def create(self, optimizer=None):
        optimizer = optimizer or torch.optim.SGD(self.model.parameters(), lr=0.1)
        return r2t.DistributedOptimizer(optimizer, self.model.named_parameters())

    def assertRaisesExactly(self, error, message, fn, *args):
        with self.assertRaises(error) as e:
            fn(*args)
        self.assertEqual(str(e.exception), message)
        return e.exception

    # A non-SGD optimizer outside the elastic modes is refused once joined (the mode decides):
    # elastic_job_test.py, test_a_non_sgd_optimizer_in_bsp_leaves_the_job.

    def test_bad_dtype(self):
        self.model.double()
        self.assertRaisesExactly(
            TypeError, "r2sp.torch.DistributedOptimizer: parameter 'weight' is torch.float64; "
            "R2SP trains float32 parameters (model.float())", self.create)

    def test_non_contiguous_tensor(self):
        self.model.weight.data = torch.zeros(3, 2).t()
        self.assertRaisesExactly(
            ValueError, "r2sp.torch.DistributedOptimizer: parameter 'weight' is not contiguous; "
            "make it so before (p.data = p.data.contiguous())", self.create)

    def test_no_scheduler(self):
        before = self.model.weight.detach().clone()
        e = self.assertRaisesExactly(
            r2t.R2SPError, "cannot join the job: no answer from the scheduler at "
            "tcp://127.0.0.1:9 within 1s: is it running, reachable, and expecting this many "
            "nodes?", self.create)
        self.assertEqual(e.code, "DEADLINE_EXCEEDED")
        self.assertTrue(torch.equal(self.model.weight, before))
        self.assertIsNone(state.STATE.worker)

    def test_unknown_flag(self):
        r2t.init(scheduler="tcp://127.0.0.1:9", no_such_flag=1)
        e = self.assertRaisesExactly(r2t.R2SPError, "unknown worker option 'no_such_flag'",
                                     self.create)
        self.assertEqual(e.code, "INVALID_ARGUMENT")


if __name__ == "__main__":
    junit_main.main()

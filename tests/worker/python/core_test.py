"""r2sp._core, the Python client's extension, in real jobs (the scheduler and server binaries):
with known gradients in bsp its final parameters equal, bit for bit, those of C++ workers given
the same gradients, alone and in a mixed job (one C++ worker, one Python); kill -9 of a Python
worker leaves a job the survivor completes, training the dead worker's samples from the next
epoch; Ctrl-C, a missing scheduler, bad flags, bad tensors and steps out of turn each raise
their exact error. Skipped where the binaries are not built."""

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

import junit_main
import job_harness

sys.path.insert(0, job_harness.CORE_DIR)
try:
    import _core
    import _models
    IMPORT_ERROR = None
except ImportError as e:
    _core = _models = None
    IMPORT_ERROR = f"r2sp._core or _models does not import from {job_harness.CORE_DIR}: {e}"

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "core_worker.py")
SERVER = ["--lr=0.1", "--momentum=0.9"]
# The C++ synthetic model core_worker.py registers: 4096 floats in 2 layers.
SYNTHETIC = ["--model=synthetic", "--model_mb=0.015625", "--layers=2", "--grad=known",
             "--init=zero"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


@unittest.skipIf(job_harness.cannot_run() or _core is None,
                 job_harness.cannot_run() or IMPORT_ERROR or "")
class CoreJobTest(unittest.TestCase):
    def setUp(self):
        self.jobs = []

    def tearDown(self):
        for job in self.jobs:
            job.close()

    def job(self, name, workers, scheduler_flags=()):
        job = job_harness.Job(name, workers, scheduler_flags=["--sync=bsp", *scheduler_flags],
                              server_flags=SERVER)
        self.jobs.append(job)
        return job

    def python_worker(self, job, name, train_samples, *flags):
        return job.python_worker(name, WORKER, [job_harness.CORE_DIR, job.path(name),
                                                str(train_samples), "--scheduler=" + job.endpoint,
                                                "--heartbeat_ms=200", *flags])

    def cpp_params(self, workers):
        """The final parameters of `workers` C++ workers, 6 bsp steps of known gradients."""
        job = self.job("cpp", workers)
        procs = [job.cpp_worker(f"cpp{i}", SYNTHETIC + ["--iterations=6",
                                                        "--dump_params=" + job.path(f"cpp{i}.params")])
                 for i in range(workers)]
        self.assertEqual(job.wait(procs), [0] * workers, job.log("cpp0") + job.log("cpp1"))
        dumps = [read(job.path(f"cpp{i}.params")) for i in range(workers)]
        self.assertEqual(dumps[1:], dumps[:1] * (workers - 1))
        return dumps[0]

    def test_known_gradients_give_the_cpp_workers_parameters_bit_for_bit(self):
        expected = self.cpp_params(2)
        job = self.job("python", 2)
        # 6 steps of 4 samples on each of 2 workers.
        procs = [self.python_worker(job, f"py{i}", 48, "--batch_size=4") for i in range(2)]
        self.assertEqual(job.wait(procs), [0, 0], job.log("py0") + job.log("py1"))
        self.assertEqual(len(expected), 4096 * 4)
        self.assertNotEqual(expected, bytes(len(expected)))
        for i in range(2):
            self.assertEqual(read(job.path(f"py{i}.params")), expected)
            result = json.loads(read(job.path(f"py{i}.result.json"), "r"))
            self.assertEqual((result["steps"], result["samples"], result["epochs"]), (6, 24, 1))

    def test_a_mixed_job_trains_to_the_same_parameters(self):
        expected = self.cpp_params(2)
        job = self.job("mixed", 2)
        dump = job.path("cpp.params")
        cpp = job.cpp_worker("cpp", SYNTHETIC + ["--iterations=6", "--dump_params=" + dump])
        python = self.python_worker(job, "py", 48, "--batch_size=4")
        self.assertEqual(job.wait([cpp, python]), [0, 0], job.log("cpp") + job.log("py"))
        self.assertEqual(read(dump), expected)
        self.assertEqual(read(job.path("py.params")), expected)

    def test_the_survivor_of_a_kill_trains_the_dead_workers_samples(self):
        job = self.job("kill", 2, ["--absorb_orphaned_shards"])
        # 64 samples: 8 steps of 4 per worker and epoch; 3 epochs.
        flags = ["--batch_size=4", "--epochs=3", "--sleep_ms=40"]
        victim = self.python_worker(job, "victim", 64, *flags)
        survivor = self.python_worker(job, "survivor", 64, *flags)
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(job.path("victim.steps.jsonl")) and \
                    len(read(job.path("victim.steps.jsonl")).splitlines()) >= 3:
                break
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        self.assertEqual(job.wait([survivor]), [0], job.log("survivor"))
        steps = [json.loads(line) for line in read(job.path("survivor.steps.jsonl"), "r").splitlines()]
        shard = 0 if steps[0]["rank"] == 0 else 1  # the workers' shards follow their ranks here
        self.assertEqual(steps[0]["live"], [0, 1])
        self.assertEqual(steps[0]["epoch_steps"], 8)
        last = [s for s in steps if s["epoch"] == 2]
        self.assertEqual(len(last), 16)
        self.assertEqual(last[0]["live"], [shard])
        self.assertEqual(last[0]["epoch_steps"], 16)
        result = json.loads(read(job.path("survivor.result.json"), "r"))
        self.assertEqual(result["epochs"], 3)

    def test_hetero_batching_gives_a_slower_python_worker_a_smaller_batch(self):
        job = self.job("hetero", 2, ["--hetero_batching", "--global_batch=64", "--min_batch=4"])
        # 2 ms per sample on both; the capped one's compute stretched 3x (the C++ loop's
        # --compute_slowdown, as for C++ workers). 1,280 samples: 20 global batches.
        common = ["--epochs=1", "--emulate_ms_per_sample=0.5"]
        fast = self.python_worker(job, "fast", 1280, *common)
        capped = self.python_worker(job, "capped", 1280, *common, "--compute_slowdown=3")
        self.assertEqual(job.wait([fast, capped]), [0, 0], job.log("fast") + job.log("capped"))
        batches = {}
        for name in ("fast", "capped"):
            steps = [json.loads(line)
                     for line in read(job.path(name + ".steps.jsonl"), "r").splitlines()]
            self.assertEqual(len(steps), 20)
            self.assertEqual(steps[0]["batch"], 32)  # the global batch shared out evenly at first
            batches[name] = steps[-1]["batch"]
        self.assertEqual(batches["fast"] + batches["capped"], 64)
        self.assertLess(batches["capped"], 24)  # about 16 of 64 for a third of the speed
        self.assertGreater(batches["fast"], 40)

    def test_ctrl_c_while_joining_raises_keyboard_interrupt_at_once(self):
        job = self.job("ctrlc", 2)  # the scheduler waits for a second worker that never comes
        worker = self.python_worker(job, "py", 48, "--batch_size=4")
        deadline = time.time() + 30
        # The worker's registration, not the server's (which comes first): a SIGINT while the
        # worker still imports its module is an ImportError, not the join's KeyboardInterrupt.
        while "worker registered" not in job.log("scheduler") and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        worker.send_signal(signal.SIGINT)
        start = time.time()
        self.assertEqual(job.wait([worker], timeout=10), [-signal.SIGINT], job.log("py"))
        self.assertLess(time.time() - start, 3)
        self.assertIn("KeyboardInterrupt", job.log("py"))

    def test_steps_out_of_turn_are_refused(self):
        job = self.job("turns", 1)
        worker = _core.Worker({"scheduler": job.endpoint, "heartbeat_ms": 200, "batch_size": 4},
                              [("w", [4, 2]), ("b", [2])])
        worker.join()
        with self.assertRaises(_core.R2SPError) as early:
            worker.next_step()
        self.assertEqual(str(early.exception), "training has not begun (begin_training, or "
                                               "iterate r2sp.torch.DistributedSampler)")
        self.assertEqual(early.exception.code, "FAILED_PRECONDITION")
        worker.begin_training(8)  # 2 steps
        step = worker.next_step()
        self.assertEqual((step.epoch, step.index, step.epoch_steps, step.batch), (0, 0, 2, 4))
        with self.assertRaises(_core.R2SPError) as outside:
            worker.gradient_ready(8, 4)
        self.assertEqual(str(outside.exception),
                         "gradient range [8, 12) is outside the model's 10 values")
        for offset, count in ((8, 4), (-1, 2), (0, 0)):
            with self.assertRaises(_core.R2SPError) as rows:
                worker.push_nonzero_rows(offset, count)
            self.assertEqual(str(rows.exception), f"sparse rows' range [{offset}, "
                             f"{offset + count}) is outside the model's 10 values")
            self.assertEqual(rows.exception.code, "OUT_OF_RANGE")
        worker.push_nonzero_rows(0, 8)
        worker.submit(4, 0.5)
        with self.assertRaises(_core.R2SPError) as unasked:
            worker.submit(4, 0.5)  # the second step, without next_step
        self.assertEqual(str(unasked.exception), "no step is wanted now (submit follows next_step)")
        self.assertEqual(worker.next_step().index, 1)
        with self.assertRaises(_core.R2SPError) as twice:
            worker.next_step()
        self.assertEqual(str(twice.exception), "step 1 is out and not completed: each step's "
                         "gradient is exchanged (completed) before the next step")
        worker.submit(4, 0.5)
        self.assertIsNone(worker.next_step())
        with self.assertRaises(_core.R2SPError) as more:
            worker.submit(4, 0.5)
        self.assertEqual(str(more.exception), "the job's training is over: the script ran more "
                         "steps than the job planned (iterate r2sp.torch.DistributedSampler)")
        self.assertEqual(worker.finish()["steps"], 2)

    def test_forward_waits_are_asked_for_before_training_and_count_the_overlapped_pulls(self):
        job = self.job("waits", 1)
        worker = _core.Worker({"scheduler": job.endpoint, "heartbeat_ms": 200, "batch_size": 4,
                               "overlap": True}, [("w", [4, 2]), ("b", [2])])
        with self.assertRaises(RuntimeError):
            worker.overlaps_pulls  # noqa: B018  (not joined)
        worker.enable_forward_waits()
        worker.join()
        self.assertTrue(worker.overlaps_pulls)
        worker.params_needed(0, 10)  # no step wanted: nothing to wait for
        with self.assertRaises(_core.R2SPError) as outside:
            worker.params_needed(8, 4)
        self.assertEqual(str(outside.exception),
                         "parameter range [8, 12) is outside the model's 10 values")
        self.assertEqual(outside.exception.code, "OUT_OF_RANGE")
        worker.begin_training(12)  # 3 steps
        with self.assertRaises(_core.R2SPError) as late:
            worker.enable_forward_waits()
        self.assertEqual(str(late.exception), "forward waits are enabled before training "
                                              "starts (before begin_training)")
        for _ in range(3):
            worker.next_step()
            worker.params_needed(0, 6)
            worker.params_needed(6, 4)
            worker.gradient_ready(0, 10)
            worker.submit(4, 0.5)
        self.assertIsNone(worker.next_step())
        worker.params_needed(0, 10)  # training over: nothing to wait for
        result = worker.finish()
        # The last step's pull is not left running (nor one before an evaluation: here the
        # last step's too).
        self.assertEqual((result["steps"], result["overlapped_pulls"]), (3, 2))

    def test_the_scripts_thread_sends_every_push_while_another_python_thread_idles(self):
        job = self.job("thread", 1)
        idle = threading.Event()
        idler = threading.Thread(target=idle.wait)
        idler.start()
        self.addCleanup(idler.join)
        self.addCleanup(idle.set)
        worker = _core.Worker({"scheduler": job.endpoint, "heartbeat_ms": 200, "batch_size": 4},
                              [("w", [4, 2]), ("b", [2])])
        worker.join()
        self.assertEqual(worker.last_push_thread, threading.get_ident())  # the initial push
        worker.begin_training(12)  # 3 steps
        for _ in range(3):
            worker.next_step()
            worker.submit(4, 0.5)
            self.assertEqual(worker.last_push_thread, threading.get_ident())
        self.assertNotEqual(worker.last_push_thread, idler.ident)
        self.assertIsNone(worker.next_step())
        self.assertEqual(worker.finish()["steps"], 3)

    def test_finishing_early_says_which_step_the_job_wanted(self):
        job = self.job("early", 1)
        worker = _core.Worker({"scheduler": job.endpoint, "heartbeat_ms": 200, "batch_size": 4},
                              [("w", [4])])
        worker.join()
        worker.begin_training(16)
        worker.next_step()
        with self.assertRaises(_core.R2SPError) as early:
            worker.finish()
        self.assertEqual(str(early.exception), "finish() before the job's training was over: it "
                         "wants step 1 of 4 of epoch 1 (iterate r2sp.torch.DistributedSampler "
                         "to the end)")


@unittest.skipIf(_core is None, IMPORT_ERROR or "")
class CoreInputTest(unittest.TestCase):
    def test_a_missing_scheduler_is_an_error_after_the_wait(self):
        worker = _core.Worker({"scheduler": f"tcp://127.0.0.1:{free_port()}",
                               "register_wait_s": 1}, [("w", [3])])
        start = time.time()
        with self.assertRaises(_core.R2SPError) as missing:
            worker.join()
        self.assertLess(time.time() - start, 10)
        self.assertTrue(str(missing.exception).startswith("cannot join the job: "),
                        str(missing.exception))

    def test_bad_options_are_invalid_arguments(self):
        for options, message in [
                ({"bogus": 1}, "unknown worker option 'bogus'"),
                ({"batch_size": "x"}, "option 'batch_size' takes an integer, got 'x'"),
                ({"batch_size": True}, "option 'batch_size' takes an integer, got true"),
                ({"batch_size": 0}, "--batch_size (SessionOptions.batch_size) must be in "
                                    "[1, 65536], got 0"),
                ({"push_codec": "zip"}, None)]:
            with self.assertRaises(_core.R2SPError) as bad:
                _core.Worker(options, [("w", [3])])
            self.assertEqual(bad.exception.code, "INVALID_ARGUMENT")
            if message:
                self.assertEqual(str(bad.exception), message)
            else:
                self.assertIn("push_codec", str(bad.exception))

    def test_early_pulls_with_overlap_only_where_the_parameters_are_staged(self):
        options = {"overlap": True, "early_pulls": "true"}
        with self.assertRaises(_core.R2SPError) as bad:
            _core.Worker(options, [("w", [3])])
        self.assertEqual(bad.exception.code, "INVALID_ARGUMENT")
        self.assertEqual(str(bad.exception),
                         "--early_pulls (SessionOptions.exchange.early_pulls) does not go with "
                         "--overlap (backward still reads the parameters while --overlap pushes) "
                         "unless the compute reads a copy of them (the Python client's CUDA "
                         "models)")
        self.assertEqual(_core.Worker(options, [("w", [3])], params_staged=True).size, 3)

    def test_a_host_process_with_its_own_lr_flag_imports_the_extension_without_a_clash(self):
        here = os.path.dirname(os.path.abspath(__file__))
        run = subprocess.run([sys.executable, os.path.join(here, "host_flags_import.py"),
                              job_harness.CORE_DIR, os.path.join(here, "host_flags.so")],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout, "host lr before: 0.125\nhost lr after: 0.125\n"
                                     "worker size: 3\n")

    def test_the_model_options_are_those_r2sp_torch_leaves_out(self):
        path = os.path.join(job_harness.ROOT, "worker", "python", "r2sp", "torch", "settings.py")
        spec = importlib.util.spec_from_file_location("r2sp_torch_settings", path)
        settings = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(settings)  # on its own: the module needs no torch
        self.assertEqual(_core.model_option_names(), sorted(settings.IGNORED_FLAGS))
        with self.assertRaises(_core.R2SPError) as refused:
            _core.Worker({"model_dir": "/tmp/m"}, [("w", [3])])
        self.assertEqual(str(refused.exception), "option 'model_dir' belongs to the C++ worker's "
                         "own model (the worker binary's --model_dir), not to a worker whose model "
                         "is the caller's")

    def test_bad_tensors_are_value_errors(self):
        for tensors, message in [
                ([], "the model has no tensors"),
                ([("w", [3]), ("w", [2])], "tensor 'w' is named twice"),
                ([("", [3])], "a tensor has an empty name"),
                ([("w", [3, 0])], "tensor 'w' has a dimension of 0 (each must be >= 1, and a "
                                  "tensor under 2^40 values)")]:
            with self.assertRaises(ValueError) as bad:
                _core.Worker({}, tensors)
            self.assertEqual(str(bad.exception), message)

    def test_malformed_tensor_entries_are_type_errors(self):
        for entry in [("w",), ("w", "3"), (3, [2]), "w"]:
            with self.assertRaises(TypeError) as bad:
                _core.Worker({}, [entry])
            self.assertEqual(str(bad.exception), "each tensor is a (name, shape) pair: a str and "
                             f"a sequence of ints, not {entry!r}")
        self.assertEqual(_core.Worker({}, [["w", (2, 3)]]).size, 6)  # lists and tuples alike

    def test_buffers_are_the_models_size_and_writable(self):
        worker = _core.Worker({}, [("w", [3, 2]), ("b", [2])])
        self.assertEqual(worker.size, 8)
        self.assertEqual(worker.tensors, [("w", 0, 6), ("b", 6, 2)])
        params = memoryview(worker.params)
        self.assertEqual((params.format, params.nbytes, params.readonly), ("f", 32, False))
        self.assertEqual(memoryview(worker.grads16).format, "H")
        with self.assertRaises(RuntimeError) as unjoined:
            worker.rank
        self.assertEqual(str(unjoined.exception), "the worker has not joined the job (call join())")

    def test_epoch_order_is_the_cpp_batchers(self):
        # models::OrderForEpoch: sorted, then shuffled by (seed, epoch, shard) as the Batcher
        # does (libstdc++'s std::shuffle over mt19937_64).
        shard = list(range(0, 20, 2))
        self.assertEqual(_core.epoch_order(shard, 1, 0, 0), [18, 16, 0, 10, 8, 4, 12, 2, 14, 6])
        self.assertEqual(_core.epoch_order(shard[::-1], 1, 0, 0), [18, 16, 0, 10, 8, 4, 12, 2, 14, 6])
        self.assertEqual(_core.epoch_order(shard, 1, 1, 0), [6, 10, 0, 18, 8, 4, 2, 14, 16, 12])

    def test_builtin_parameters_are_the_built_in_models_initial_values(self):
        params = _models.builtin_parameters("cnn", [1, 28, 28], 10, 1)
        self.assertEqual([(name, shape, len(values)) for name, shape, values in params], [
            ("conv1.weight", [32, 1, 5, 5], 3200), ("conv1.bias", [32], 128),
            ("conv2.weight", [64, 32, 5, 5], 204800), ("conv2.bias", [64], 256),
            ("fc1.weight", [1024, 3136], 12845056), ("fc1.bias", [1024], 4096),
            ("fc2.weight", [10, 1024], 40960), ("fc2.bias", [10], 40)])
        self.assertEqual(memoryview(params[0][2]).cast("f")[0], -0.10941257327795029)
        self.assertEqual(params, _models.builtin_parameters("cnn", [1, 28, 28], 10, 1))
        with self.assertRaises(ValueError) as unknown:
            _models.builtin_parameters("vgg", [1, 28, 28], 10, 1)
        self.assertEqual(str(unknown.exception), "unknown model 'vgg' (mlp, cnn, resnet20)")

    def test_epoch_samples_deal_a_dead_shards_samples_out(self):
        self.assertEqual(_core.epoch_samples(10, 2, 0, [0, 1]), [0, 2, 4, 6, 8])
        self.assertEqual(_core.epoch_samples(10, 2, 0, [0]), [0, 2, 4, 6, 8, 1, 3, 5, 7, 9])
        # Shards of 4, 3, 3: dead shard 1 deals its 3 to shards 0, 2, 0.
        self.assertEqual(_core.fewest_epoch_samples(10, 3, [0, 2]), 4)
        with self.assertRaises(_core.R2SPError):
            _core.epoch_samples(10, 2, 0, [1, 0])


if __name__ == "__main__":
    junit_main.main()

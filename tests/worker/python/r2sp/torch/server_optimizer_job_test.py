"""The script's optimizer applied by the servers (server_optimizer.py) in real jobs: two Python
workers running optimizer_train.py in bsp, with known gradients, two parameter groups and a
scheduler changing the rate every step, end with the parameters torch.optim reaches applying
the same optimizer to the averaged gradients, for SGD with nesterov, SGD with dampening, Adam
and AdamW, bit for bit: the servers round where torch's vectorised CPU kernels round (its
fused multiply-adds included; the tensors are multiples of 16 values, so torch takes those
kernels for every value). Torch 1.13's, that is: under torch 2, whose Adam interpolates its
first moment, Adam and AdamW end within a few units in the last place. Accumulating each step
over 4 backward passes (no_sync()) with --overlap gives the same parameters and one push per
step; clipping with --overlap (edits_gradients=True) clips each worker's gradient before the
servers average; a step one worker skips (skip_step(), as a GradScaler skips) averages the
other's gradient alone. An optimizer the servers do not apply (RMSprop, Adam with amsgrad)
runs on each worker with the averaged gradient: the parameters are torch's bit for bit; a step
one worker skips steps both with the other's gradient, one every worker skips steps none. A job
killed after worker 0 saved the script's checkpoint (optimizer.state_dict(): the servers'
moments and step) and resumed from it by a new job ends with the parameters of a job that ran
through, bit for bit; so does a job that lost its server mid-job (bsp: the job fails) and was
resumed from the servers' checkpoints, taken every step (the script's schedule brought to
r2sp.torch.first_step())."""

import os
import re
import tempfile
import time
import unittest

import r2sp_testing
import training_test

import junit_main  # noqa: E402  (training_test set up the path)

if not training_test.SKIP:
    import numpy
    import torch

    import optimizer_train

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optimizer_train.py")
STEPS = 6  # 24 samples in 2 shards of 12: 3 steps of 4 per epoch, 2 epochs


def worker_gradient(params, rank, step, clip):
    """{name: worker `rank`'s gradient at `step`}, its norm clipped to `clip` (0: not) as
    clip_grad_norm_ clips it in the script."""
    for name, p in params.items():
        p.grad = optimizer_train.known_gradient(name, rank, step)
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(params.values(), clip)
    return {name: p.grad.clone() for name, p in params.items()}


def reference(kind, clip=0, skip=()):
    """The parameters after STEPS of torch.optim on the two workers' averaged gradients; the
    (rank, step) pairs in `skip` are left out (a step without any takes no optimizer step)."""
    params = {n: torch.nn.Parameter(v.clone()) for n, v in optimizer_train.initial().items()}
    optimizer = optimizer_train.make_optimizer(kind, params)
    schedule = optimizer_train.make_schedule(optimizer)
    for step in range(STEPS):
        grads = [worker_gradient(params, rank, step, clip) for rank in range(2)
                 if (rank, step) not in skip]
        if grads:
            for name, p in params.items():
                p.grad = sum(g[name] for g in grads) / len(grads)
            optimizer.step()
        schedule.step()
    return torch.cat([p.detach().reshape(-1) for p in params.values()]).numpy()


def adam_ulps():
    """How far the servers' Adam and AdamW may end from this torch's, in units in the last place:
    0 from torch 1.13's, whose arithmetic they reproduce; torch 2 moves the first moment by
    interpolation (exp_avg.lerp_), which rounds otherwise, so a few units after these steps."""
    return 0 if torch.__version__.startswith("1.") else 4


def ulps(a, b):
    """The most units in the last place between a and b, element by element (same signs)."""
    return int(numpy.max(numpy.abs(a.view(numpy.int32).astype(numpy.int64)
                                   - b.view(numpy.int32).astype(numpy.int64))))


@unittest.skipIf(training_test.cannot_run(), training_test.cannot_run() or "")
class ServerOptimizerJobTest(unittest.TestCase):
    def run_job(self, kind, flags="", job_flags=None, **env):
        """Both workers' final parameters (they must agree) of a 2-worker bsp job, with these
        worker flags, scheduler and server flags (training_test.Job's keywords) and script
        settings (optimizer_train.py)."""
        job = training_test.Job(workers=2, **(job_flags or {}))
        self.addCleanup(job.close)
        outs = [job.path(f"final{i}") for i in range(2)]
        workers = [job.torch_worker(i, "--epochs=2 --batch_size=4 " + flags, outs[i],
                                    script=SCRIPT, script_env=dict(env, OPTIMIZER=kind))
                   for i in range(2)]
        self.assertEqual(job.wait(workers), [0, 0],
                         job.log("worker0") + job.log("worker1") + job.log("server0"))
        self.server_log = job.log("server0")
        self.worker_logs = [job.log(f"worker{i}") for i in range(2)]
        finals = []
        for out in outs:
            with open(out, "rb") as f:
                finals.append(numpy.frombuffer(f.read(), dtype=numpy.float32))
        self.assertEqual(finals[0].tobytes(), finals[1].tobytes())
        return finals[0]

    def run_killed(self, kind, checkpoint):
        """A job whose workers stop (as killed) once worker 0 saved `checkpoint` after 4 of
        the 6 steps (mid-epoch)."""
        job = training_test.Job(workers=2)
        self.addCleanup(job.close)
        env = dict(OPTIMIZER=kind, CHECKPOINT=checkpoint, SAVE_AT="4")
        workers = [job.torch_worker(i, "--epochs=2 --batch_size=4", job.path(f"final{i}"),
                                    script=SCRIPT, script_env=env) for i in range(2)]
        self.assertEqual(job.wait(workers), [9, 9], job.log("worker0") + job.log("worker1"))
        job.close()

    def check_resumed(self, kind):
        uninterrupted = self.run_job(kind)
        with tempfile.TemporaryDirectory(prefix="r2sp_resume_") as tmp:
            checkpoint = os.path.join(tmp, "checkpoint.pt")
            self.run_killed(kind, checkpoint)
            saved = torch.load(checkpoint)
            self.assertEqual(saved["step"], 4)
            self.assertEqual([g["r2sp_steps"] for g in saved["optimizer"]["param_groups"]],
                             [4.0, 4.0])
            resumed = self.run_job(kind, CHECKPOINT=checkpoint, RESUME="1")
        self.assertEqual(resumed.tobytes(), uninterrupted.tobytes())
        return saved

    def test_adamw_resumes_from_the_scripts_checkpoint(self):
        saved = self.check_resumed("adamw")
        self.assertEqual([float(s["step"]) for s in saved["optimizer"]["state"].values()],
                         [4.0, 4.0, 4.0])
        self.assertEqual(sorted(saved["optimizer"]["state"][1]), ["exp_avg", "exp_avg_sq",
                                                                  "step"])

    def test_sgd_nesterov_resumes_from_the_scripts_checkpoint(self):
        saved = self.check_resumed("sgd_nesterov")
        self.assertEqual(list(saved["optimizer"]["state"][2]), ["momentum_buffer"])
        self.assertEqual(saved["optimizer"]["state"][2]["momentum_buffer"].shape, (48,))

    def test_adamw_resumes_from_the_servers_checkpoints_after_a_server_is_lost(self):
        uninterrupted = self.run_job("adamw")
        with tempfile.TemporaryDirectory(prefix="r2sp_server_checkpoints_") as directory:
            checkpoints = ["--checkpoint_dir=" + directory, "--checkpoint_every=1steps"]
            job_id = ["--job_id=resumed-adamw"]  # the resumed servers check it
            job = training_test.Job(workers=2, scheduler_flags=job_id, server_flags=checkpoints)
            self.addCleanup(job.close)
            progress = job.path("progress")
            env = dict(OPTIMIZER="adamw", PROGRESS=progress, STEP_SLEEP="0.3")
            workers = [job.torch_worker(i, "--epochs=2 --batch_size=4", job.path(f"final{i}"),
                                        script=SCRIPT, script_env=env) for i in range(2)]
            deadline = time.time() + 60
            while time.time() < deadline and not (os.path.exists(progress) and
                                                  open(progress).read() in ("3", "4", "5")):
                time.sleep(0.02)
            next(p for p in job.processes if p.name == "server0").kill()
            self.assertEqual(job.wait(workers), [1, 1], job.log("worker0"))
            self.assertIn("JobLost: the job failed: server 0", job.log("worker0"))
            job.close()
            resumed = self.run_job("adamw", "", dict(scheduler_flags=job_id,
                                                     server_flags=checkpoints + ["--resume"]),
                                   RESUME="servers")
        at = re.search(r"the job is at step (\d+) \(servers resumed from checkpoints\)",
                       self.worker_logs[0])
        self.assertIsNotNone(at, self.worker_logs[0])
        self.assertIn(int(at.group(1)), range(1, STEPS))  # mid-job
        self.assertEqual(resumed.tobytes(), uninterrupted.tobytes())

    def check(self, kind):
        got, want = self.run_job(kind), reference(kind)
        self.assertEqual(len(got), 32 + 16 + 48)
        self.assertTrue(numpy.all(numpy.sign(got) == numpy.sign(want)), (got, want))
        self.assertLessEqual(ulps(got, want), adam_ulps() if "adam" in kind else 0, (got, want))
        self.assertFalse(numpy.array_equal(want, optimizer_train.initial()["w"].numpy()))

    def test_sgd_nesterov(self):
        self.check("sgd_nesterov")

    def test_sgd_dampening(self):
        self.check("sgd_dampening")

    def test_adam(self):
        self.check("adam")

    def test_adamw(self):
        self.check("adamw")

    def test_accumulation_pushes_once_per_step_the_same_sum(self):
        # Each step in 4 backward passes of loss / 4 (exact: a power of two), with --overlap:
        # the same parameters, and one push per partition and step (12, and worker 0's init).
        got = self.run_job("sgd_nesterov", "--overlap", ACCUMULATE="4")
        self.assertEqual(got.tobytes(), reference("sgd_nesterov").tobytes())
        self.assertIn("server 0 stopping: 13 pushes", self.server_log)

    def test_a_skipped_step_averages_the_other_workers_gradient(self):
        got = self.run_job("adam", SKIP="1:2")
        self.assertLessEqual(ulps(got, reference("adam", skip=[(1, 2)])), adam_ulps())
        self.assertNotEqual(got.tobytes(), reference("adam").tobytes())

    def test_rmsprop_steps_on_each_worker_with_the_averaged_gradient(self):
        self.check_workers_step("rmsprop")

    def test_adam_amsgrad_steps_on_each_worker_with_the_averaged_gradient(self):
        self.check_workers_step("adam_amsgrad", "--overlap")

    def check_workers_step(self, kind, flags=""):
        got = self.run_job(kind, flags)
        self.assertEqual(got.tobytes(), reference(kind).tobytes())
        self.assertFalse(numpy.array_equal(got, optimizer_train.initial()["w"].numpy()))

    def test_workers_steps_skipped_by_one_or_every_worker(self):
        got = self.run_job("rmsprop", SKIP="1:2")
        self.assertEqual(got.tobytes(), reference("rmsprop", skip=[(1, 2)]).tobytes())
        got = self.run_job("rmsprop", SKIP="*:3")
        self.assertEqual(got.tobytes(), reference("rmsprop", skip=[(0, 3), (1, 3)]).tobytes())
        self.assertNotEqual(got.tobytes(), reference("rmsprop").tobytes())

    def test_clipping_with_overlap_clips_each_workers_gradient(self):
        # The known gradients' norms are about 10 (worker 0) and 20: a clip to 2 changes both.
        got = self.run_job("adamw", "--overlap", CLIP="2")
        self.assertLessEqual(ulps(got, reference("adamw", clip=2)), adam_ulps())
        self.assertNotEqual(got.tobytes(), reference("adamw").tobytes())


if __name__ == "__main__":
    junit_main.main()

"""r2sp.torch's job functions (init, rank, size, local_rank, seed, mode, batch_size, evaluates,
report_eval, finish) and the finish or abort at exit, over a FakeWorker."""

import io
import os
import sys
import unittest
from unittest import mock

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import torch  # noqa: E402

    import r2sp.torch as r2t  # noqa: E402
    from r2sp.torch import state  # noqa: E402

JOIN_FIRST = ("r2sp.torch.DistributedOptimizer(optimizer, model.named_parameters()) first (it "
              "joins the job)")
NOT_JOINED = "no job joined yet; create " + JOIN_FIRST


@unittest.skipIf(SKIP, SKIP or "")
class JobFunctionsTest(unittest.TestCase):
    def setUp(self):
        state.STATE.__init__()

    def tearDown(self):
        state.STATE.__init__()

    def join(self, **options):
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1",
                                                     "LOCAL_RANK": "2"})
        state.STATE.worker = r2sp_testing.FakeWorker([], [("w", [1])], **options)
        return state.STATE.worker

    def test_init_reads_the_environment(self):
        env = {"R2SP_SCHEDULER": "tcp://h:9", "R2SP_WORKER_FLAGS": "--epochs=2",
               "LOCAL_RANK": "1"}
        with mock.patch.dict(os.environ, env, clear=True):
            r2t.init(["--batch_size=8"], overlap=True)
        self.assertEqual(state.STATE.settings.flags, ("--scheduler=tcp://h:9", "--epochs=2",
                                                      "--batch_size=8", "--overlap"))
        self.assertEqual(r2t.local_rank(), 1)
        self.assertEqual(r2t.seed(), 1)  # the job's default
        with mock.patch.dict(os.environ, dict(env, R2SP_WORKER_FLAGS="--seed=4"), clear=True):
            r2t.init()
        self.assertEqual(r2t.seed(), 4)

    def test_init_after_joining(self):
        self.join()
        with self.assertRaises(RuntimeError) as e:
            r2t.init()
        self.assertEqual(str(e.exception), "r2sp.torch.init: the job is already joined "
                                           "(DistributedOptimizer was created); call init() "
                                           "before it")

    def test_before_joining(self):
        for name in ("mode", "batch_size", "evaluates", "report_eval"):
            with self.subTest(name=name):
                with self.assertRaises(RuntimeError) as e:
                    getattr(r2t, name)(*([0.5] if name == "report_eval" else []))
                self.assertEqual(str(e.exception), f"r2sp.torch.{name}(): {NOT_JOINED}")
        for name in ("local_rank", "seed"):
            with self.assertRaises(RuntimeError) as e:
                getattr(r2t, name)()
            self.assertEqual(str(e.exception), f"r2sp.torch.{name}(): call r2sp.torch.init() "
                                               "first")
        for name, variable in (("rank", "RANK"), ("size", "WORLD_SIZE")):
            with self.subTest(name=name), self.assertRaises(RuntimeError) as e:
                getattr(r2t, name)()
            self.assertEqual(str(e.exception), f"r2sp.torch.{name}(): no job joined yet and "
                             f"init() has not run; set {variable} (torchrun and tools/launch "
                             f"do) before r2sp.torch.init(), or create {JOIN_FIRST}")
        self.assertEqual(r2t.finish(), {})

    def test_rank_and_size_before_joining_come_from_rank_and_world_size(self):
        env = {"R2SP_SCHEDULER": "tcp://h:9", "RANK": "1", "WORLD_SIZE": "3"}
        with mock.patch.dict(os.environ, env, clear=True):
            r2t.init()
        self.assertEqual((r2t.rank(), r2t.size()), (1, 3))
        self.assertEqual(state.STATE.settings.options["rank"], 1)  # asked of the scheduler
        with mock.patch.dict(os.environ, {"R2SP_SCHEDULER": "tcp://h:9", "RANK": "0"},
                             clear=True):
            r2t.init()
        self.assertEqual(r2t.rank(), 0)
        with self.assertRaises(RuntimeError) as e:
            r2t.size()
        self.assertEqual(str(e.exception), "r2sp.torch.size(): no job joined yet and init() "
                         "found no WORLD_SIZE; set WORLD_SIZE (torchrun and tools/launch do) "
                         f"before r2sp.torch.init(), or create {JOIN_FIRST}")
        with mock.patch.dict(os.environ, {"R2SP_SCHEDULER": "tcp://h:9"}, clear=True):
            r2t.init()
        with self.assertRaises(RuntimeError) as e:
            r2t.rank()
        self.assertEqual(str(e.exception), "r2sp.torch.rank(): no job joined yet and init() "
                         "found no RANK; set RANK (torchrun and tools/launch do) before "
                         f"r2sp.torch.init(), or create {JOIN_FIRST}")

    def test_once_joined_rank_and_size_are_the_schedulers(self):
        # A worker that joined a running job took the next rank, not the one RANK asked for.
        env = {"R2SP_SCHEDULER": "tcp://h:9", "RANK": "1", "WORLD_SIZE": "2"}
        with mock.patch.dict(os.environ, env, clear=True):
            r2t.init()
        state.STATE.worker = r2sp_testing.FakeWorker([], [("w", [1])], rank=2, workers=3)
        self.assertEqual((r2t.rank(), r2t.size()), (2, 3))

    def test_the_workers_place_in_the_job(self):
        self.join(rank=1, workers=3, mode="r2sp", batch_size=16, evaluates=False)
        self.assertEqual((r2t.rank(), r2t.size(), r2t.local_rank(), r2t.mode(),
                          r2t.evaluates(), r2t.batch_size()), (1, 3, 2, "r2sp", False, 16))

    def test_batch_size_is_the_current_steps(self):
        worker = self.join(batch_size=16, steps=r2sp_testing.steps_of([2], batch=12))
        state.STATE.train_samples = 100
        state.STATE.next_step("test")
        self.assertEqual(r2t.batch_size(), 12)
        state.STATE.submitted()
        self.assertEqual(r2t.batch_size(), 12)  # the last step's, until the next is known
        self.assertEqual(worker.names(), ["next_step"])

    def test_training_begins_once_with_one_size(self):
        worker = self.join()
        state.STATE.begin(64, "test")
        state.STATE.begin(64, "again")
        self.assertEqual(worker.calls, [("begin_training", 64)])
        for size, message in ((32, "r2sp.torch.again: training began with 64 samples; it "
                                   "cannot change to 32"),
                              (0, "r2sp.torch.again: the training set's size must be a positive "
                                  "integer, not 0")):
            with self.subTest(size=size):
                with self.assertRaises(ValueError) as e:
                    state.STATE.begin(size, "again")
                self.assertEqual(str(e.exception), message)

    def test_a_step_before_training_began(self):
        self.join()
        with self.assertRaises(RuntimeError) as e:
            state.STATE.next_step("DistributedOptimizer.step")
        self.assertEqual(str(e.exception), "r2sp.torch.DistributedOptimizer.step: training has "
                                           "not begun: iterate a r2sp.torch.DistributedSampler, "
                                           "or pass train_samples= (the training set's size) to "
                                           "DistributedOptimizer")

    def test_report_eval(self):
        worker = self.join()
        self.assertTrue(r2t.report_eval(0.875, torch.tensor(0.25)))
        self.assertEqual(worker.calls, [("report_eval", 0.875, 0.25)])
        cases = [(ValueError, (87.5,), "r2sp.torch.report_eval: accuracy is a fraction in "
                  "[0, 1], not 87.5 (a percentage? divide it by 100)"),
                 (TypeError, ("high",), "r2sp.torch.report_eval: accuracy must be a number, "
                  "not 'high'"),
                 (TypeError, (0.5, float("nan")), "r2sp.torch.report_eval: loss must be a "
                  "number, not nan")]
        for error, args, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(error) as e:
                    r2t.report_eval(*args)
                self.assertEqual(str(e.exception), message)

    def test_finish_once(self):
        worker = self.join()
        self.assertEqual(r2t.finish(), {"steps": 3})
        self.assertEqual(r2t.finish(), {"steps": 3})
        state.STATE.at_exit()
        self.assertEqual(worker.names(), ["finish"])

    def test_a_refused_finish_leaves_the_job(self):
        worker = self.join()

        def refuse():
            worker.calls.append(("finish",))
            raise r2t.R2SPError("finish() before the job's training was over")
        worker.finish = refuse
        with self.assertRaises(r2t.R2SPError):
            r2t.finish()
        with self.assertRaises(RuntimeError) as e:
            r2t.finish()
        self.assertEqual(str(e.exception), "r2sp.torch.finish: this worker already left the "
                                           "job (aborted)")
        with mock.patch.object(sys, "last_value", None, create=True):
            state.STATE.at_exit()
        self.assertEqual(worker.names(), ["finish"])

    def test_at_exit_finishes_a_script_that_did_not(self):
        worker = self.join()
        with mock.patch.object(sys, "last_value", None, create=True):
            state.STATE.at_exit()
        self.assertEqual(worker.names(), ["finish"])

    def test_at_exit_after_an_unhandled_exception_aborts(self):
        worker = self.join()
        with mock.patch.object(sys, "last_value", KeyError("x"), create=True):
            state.STATE.at_exit()
            state.STATE.at_exit()
        self.assertEqual(worker.calls, [("abort", "the script raised KeyError: 'x'")])
        with self.assertRaises(RuntimeError) as e:
            r2t.finish()
        self.assertEqual(str(e.exception), "r2sp.torch.finish: this worker already left the "
                                           "job (aborted)")


    def test_at_exit_a_finish_the_worker_refuses_is_said(self):
        worker = self.join()

        def refuse():
            worker.calls.append(("finish",))
            raise r2t.R2SPError("finish() before the job's training was over")
        worker.finish = refuse
        with mock.patch.object(sys, "last_value", None, create=True), \
                mock.patch.object(sys, "stderr", io.StringIO()) as err:
            state.STATE.at_exit()
            state.STATE.at_exit()
        self.assertEqual(err.getvalue(), "r2sp: this worker left the job without finishing: "
                                         "finish() before the job's training was over\n")
        self.assertEqual(worker.names(), ["finish"])

    def test_after_ctrl_c_or_a_lost_job_nothing_more_at_exit(self):
        for error in (KeyboardInterrupt(), r2t.JobLost("the scheduler is gone")):
            with self.subTest(error=type(error).__name__):
                state.STATE.__init__()
                worker = self.join(steps=r2sp_testing.steps_of([2]))
                state.STATE.train_samples = 10

                def interrupted():
                    raise error
                worker.next_step = interrupted
                with self.assertRaises(type(error)):
                    state.STATE.next_step("test")
                with mock.patch.object(sys, "last_value", None, create=True):
                    state.STATE.at_exit()
                self.assertEqual(worker.calls, [])


if __name__ == "__main__":
    junit_main.main()

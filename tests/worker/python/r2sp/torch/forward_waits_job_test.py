"""Overlapped pulls (DistributedOptimizer(..., module=model), forward_waits.py) in real jobs:
two Python workers running tiny_train.py in bsp with --overlap end with exactly the parameters
of the same job without module= (bsp is deterministic; both workers start from the same
parameters, so that the result does not depend on which becomes worker 0), and finish() counts
the pulls that ran on into the next forward: every step's but those before an evaluation (the
evaluating worker's epoch ends) and the worker's last. With --nooverlap_pulls, module= changes nothing."""

import unittest

import r2sp_testing
import training_test

import junit_main  # noqa: E402  (training_test set up the path)

FLAGS = "--epochs=2 --batch_size=8 --seed=3 --overlap"


@unittest.skipIf(training_test.cannot_run(), training_test.cannot_run() or "")
class ForwardWaitsJobTest(unittest.TestCase):
    def run_job(self, flags, module):
        """Both workers' results of a bsp job of 2 epochs of 4 steps."""
        job = training_test.Job(workers=2)
        self.addCleanup(job.close)
        # Both from the same random parameters (TINY_SEED), so that the jobs' do not depend on
        # which process is worker 0.
        workers = [job.torch_worker(i, flags, "2",
                                    script_env={"TINY_MODULE": module, "TINY_SEED": "100"})
                   for i in range(2)]
        for i, w in enumerate(workers):
            self.assertEqual(w.wait(timeout=120), 0, job.log(f"worker{i}"))
        return sorted((job.result(i) for i in range(2)), key=lambda r: r["rank"])

    def test_overlapped_pulls_end_with_the_same_parameters_as_without(self):
        overlapped = self.run_job(FLAGS, "1")
        plain = self.run_job(FLAGS, "0")
        for with_module, without in zip(overlapped, plain):
            self.assertTrue(with_module["overlaps_pulls"])
            self.assertFalse(without["overlaps_pulls"])
            self.assertEqual(without["finish"]["overlapped_pulls"], 0)
            self.assertEqual(with_module["joined"], without["joined"])
            self.assertNotEqual(with_module["final"], with_module["joined"])
            self.assertEqual(with_module["final"], without["final"])
            self.assertEqual(with_module["batches"], [8] * 8)
        # 8 steps: the evaluating worker's pulls before its 2 evaluations do not run on, nor
        # anyone's last.
        counts = {r["rank"]: r["finish"]["overlapped_pulls"] for r in overlapped}
        evaluator = [r["rank"] for r in overlapped if r["evals"]]
        self.assertEqual(len(evaluator), 1)
        self.assertEqual(counts[evaluator[0]], 6)
        self.assertEqual(counts[1 - evaluator[0]], 7)

    def test_nooverlap_pulls_turns_them_off(self):
        for r in self.run_job(FLAGS + " --nooverlap_pulls", "1"):
            self.assertFalse(r["overlaps_pulls"])
            self.assertEqual(r["finish"]["overlapped_pulls"], 0)
            self.assertEqual(r["finish"]["steps"], 8)


if __name__ == "__main__":
    junit_main.main()

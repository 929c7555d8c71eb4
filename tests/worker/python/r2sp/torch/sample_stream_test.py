"""r2sp.torch.sample_stream.SampleStream: the C++ worker's order of a worker's samples
(_core.epoch_order, models::OrderForEpoch as the oracle): a fresh pass each epoch with fixed
batches; with tuned batches passes that run on across epochs, a new plan taken up when the
current pass runs out."""

import unittest

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    from r2sp import _core  # noqa: E402
    from r2sp.torch.sample_stream import SampleStream  # noqa: E402


def order(samples, seed, epoch, shard):
    return list(_core.epoch_order(list(samples), seed, epoch, shard))


@unittest.skipIf(SKIP, SKIP or "")
class SampleStreamTest(unittest.TestCase):
    SHARD1 = [1, 4, 7, 10]  # shard 1 of 3 over 12 samples

    def test_fixed_batches_start_each_epoch_afresh(self):
        s = SampleStream(12, 3, 1, seed=5, continuous=False)
        s.start_epoch(0, [0, 1, 2])
        self.assertEqual(s.take(3), order(self.SHARD1, 5, 0, 1)[:3])
        s.start_epoch(1, [0, 1, 2])
        self.assertEqual(s.take(4), order(self.SHARD1, 5, 1, 1))
        # Shard 2 dead: shard 1 takes every other of its samples (positions 1 and 3).
        s.start_epoch(2, [0, 1])
        self.assertEqual(s.take(6), order(self.SHARD1 + [5, 11], 5, 2, 1))

    def test_tuned_batches_run_passes_on_and_take_a_new_plan_at_the_next_pass(self):
        s = SampleStream(12, 3, 1, seed=5, continuous=True)
        s.start_epoch(0, [0, 1, 2])
        self.assertEqual(s.take(3), order(self.SHARD1, 5, 0, 1)[:3])
        s.start_epoch(1, [0, 1])
        first = order(self.SHARD1, 5, 0, 1)[3:] + order(self.SHARD1 + [5, 11], 5, 1, 1)
        self.assertEqual(s.take(7), first)
        self.assertEqual(s.take(2), order(self.SHARD1 + [5, 11], 5, 2, 1)[:2])

    def test_an_epoch_started_again_goes_on(self):
        s = SampleStream(12, 3, 1, seed=5, continuous=False)
        s.start_epoch(0, [0, 1, 2])
        self.assertEqual(s.take(2), order(self.SHARD1, 5, 0, 1)[:2])
        s.start_epoch(0, [0, 1, 2])
        self.assertEqual(s.take(2), order(self.SHARD1, 5, 0, 1)[2:])

    def test_a_shard_without_samples(self):
        s = SampleStream(2, 3, 2, seed=1, continuous=False)
        with self.assertRaises(ValueError) as e:
            s.start_epoch(0, [0, 1, 2])
        self.assertEqual(str(e.exception), "r2sp.torch.DistributedSampler: a training set of 2 "
                                           "samples has none for data shard 2 of 3; every "
                                           "worker needs samples")


if __name__ == "__main__":
    junit_main.main()

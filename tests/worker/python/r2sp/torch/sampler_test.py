"""r2sp.torch.DistributedSampler over a FakeWorker: each epoch's batches follow the job's
steps (one next_step per batch, none after an epoch's last step so the evaluation can run),
the scheduler's plan (a dead worker's samples taken over), the C++ worker's order
(_core.epoch_order, models::OrderForEpoch) and tuned batch sizes (passes across epochs)."""

import unittest

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import r2sp.torch as r2t  # noqa: E402
    from r2sp import _core  # noqa: E402
    from r2sp.torch import state  # noqa: E402

FakeStep = r2sp_testing.FakeStep


def order(samples, seed, epoch, shard):
    """The C++ worker's order of these samples in that epoch (models::OrderForEpoch)."""
    return list(_core.epoch_order(list(samples), seed, epoch, shard))


def step(clock, epoch, index, epoch_steps, batch, live):
    return FakeStep(clock=clock, epoch=epoch, index=index, epoch_steps=epoch_steps, batch=batch,
                    live_shards=live)


@unittest.skipIf(SKIP, SKIP or "")
class SamplerTest(unittest.TestCase):
    def setUp(self):
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"})

    def tearDown(self):
        state.STATE.__init__()

    def join(self, steps, **options):
        options = {"data_world": 2, "data_shard": 0, "batch_size": 2, **options}
        state.STATE.worker = r2sp_testing.FakeWorker([], [("w", [1])], steps=steps, **options)
        return state.STATE.worker

    def epoch(self, sampler):
        """One iteration's batches, each followed by the optimizer's submit."""
        batches = []
        for b in sampler:
            batches.append(b)
            state.STATE.submitted()
        return batches

    def test_the_order_is_the_cpp_workers(self):
        # models::OrderForEpoch through the extension: the oracle these tests compare with.
        self.assertEqual(order([0, 2, 4, 6, 8], 1, 0, 0), [8, 2, 0, 4, 6])
        self.assertEqual(order([0, 2, 4, 6, 8], 1, 1, 0), [2, 6, 4, 8, 0])
        self.join([step(0, 0, 0, 1, 5, [0, 1])])
        self.assertEqual(self.epoch(r2t.DistributedSampler(10)), [[8, 2, 0, 4, 6]])

    def test_epochs_follow_the_steps_and_the_plan(self):
        worker = self.join([step(0, 0, 0, 2, 2, [0, 1]), step(1, 0, 1, 2, 2, [0, 1]),
                            step(2, 1, 0, 3, 3, [0]), step(3, 1, 1, 3, 3, [0]),
                            step(4, 1, 2, 3, 3, [0])])
        s = r2t.DistributedSampler(list(range(10)))
        self.assertEqual(len(s), 2)  # fewest samples (5) // the initial batch (2)
        first = self.epoch(s)
        self.assertEqual(first, [[8, 2], [0, 4]])
        # No next_step after the epoch's last step: the evaluation comes first.
        self.assertEqual(worker.names(), ["begin_training", "next_step", "next_step"])
        self.assertEqual(len(s), 2)
        second = self.epoch(s)  # shard 1's samples too, in epoch 1's order
        self.assertEqual(second, [[3, 5, 0], [9, 4, 2], [1, 7, 8]])
        self.assertEqual(order(range(10), 1, 1, 0), [3, 5, 0, 9, 4, 2, 1, 7, 8, 6])
        self.assertEqual(len(s), 3)
        self.assertEqual(self.epoch(s), [])  # training over
        self.assertEqual(worker.names(), ["begin_training"] + ["next_step"] * 6)

    def test_a_pass_that_runs_out_goes_on_with_the_next_epochs_order(self):
        self.join([step(0, 0, 0, 2, 4, [0, 1]), step(1, 0, 1, 2, 4, [0, 1])])
        s = r2t.DistributedSampler(10, seed=1)
        self.assertEqual(self.epoch(s), [[8, 2, 0, 4], [6, 2, 6, 4]])

    def test_tuned_batches_run_the_passes_on_across_epochs(self):
        self.join([step(0, 0, 0, 2, 3, [0, 1]), step(1, 0, 1, 2, 3, [0, 1]),
                   step(2, 1, 0, 2, 3, [0, 1]), step(3, 1, 1, 2, 3, [0, 1])],
                  hetero_batching=True)
        s = r2t.DistributedSampler(10)
        pass2 = order([0, 2, 4, 6, 8], 1, 2, 0)
        self.assertEqual(self.epoch(s), [[8, 2, 0], [4, 6, 2]])  # pass 0, then pass 1's first
        self.assertEqual(self.epoch(s), [[6, 4, 8], [0] + pass2[:2]])

    def test_a_loop_left_mid_epoch_goes_on_where_it_was(self):
        self.join([step(0, 0, 0, 2, 2, [0, 1]), step(1, 0, 1, 2, 2, [0, 1]),
                   step(2, 1, 0, 1, 2, [0, 1])])
        s = r2t.DistributedSampler(10)
        for b in s:
            self.assertEqual(b, [8, 2])
            state.STATE.submitted()
            break
        self.assertEqual(self.epoch(s), [[0, 4]])  # the rest of epoch 0
        self.assertEqual(self.epoch(s), [[2, 6]])  # epoch 1

    def test_a_step_of_the_next_epoch_is_kept_for_the_next_iteration(self):
        worker = self.join([step(0, 0, 0, 3, 2, [0, 1]), step(1, 1, 0, 1, 2, [0, 1])])
        s = r2t.DistributedSampler(10)
        batches = []
        for b in s:
            batches.append(b)
            state.STATE.submitted()
        self.assertEqual(batches, [[8, 2]])
        self.assertEqual(self.epoch(s), [[2, 6]])  # epoch 1's order
        self.assertEqual(worker.names(), ["begin_training", "next_step", "next_step"])

    def test_seed_defaults_to_the_jobs(self):
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"},
                                                    ["--seed=2"])
        self.join([step(0, 0, 0, 1, 5, [0, 1])])
        self.assertEqual(self.epoch(r2t.DistributedSampler(10)), [order([0, 2, 4, 6, 8], 2, 0, 0)])
        self.assertEqual(order([0, 2, 4, 6, 8], 2, 0, 0), [2, 4, 6, 8, 0])

    def test_without_the_optimizer(self):
        with self.assertRaises(RuntimeError) as e:
            iter(r2t.DistributedSampler(10)).__next__()
        self.assertEqual(str(e.exception),
                         "r2sp.torch.DistributedSampler: no job joined yet; create "
                         "r2sp.torch.DistributedOptimizer(optimizer, model.named_parameters()) "
                         "first (it joins the job)")

    def test_a_batch_asked_for_before_the_last_was_stepped_comes_at_once(self):
        # DataLoader workers ask ahead: the batch comes without the job's step, which the
        # optimizer's step() takes; the epoch still has its 3 batches.
        worker = self.join([step(0, 0, 0, 3, 2, [0, 1]), step(1, 0, 1, 3, 2, [0, 1]),
                            step(2, 0, 2, 3, 2, [0, 1])])
        it = iter(r2t.DistributedSampler(12))
        epoch0 = order(range(0, 12, 2), 1, 0, 0)  # shard 0's samples, in epoch 0's order
        self.assertEqual([next(it), next(it)], [epoch0[0:2], epoch0[2:4]])
        self.assertEqual(worker.names(), ["begin_training", "next_step"])
        self.assertEqual(list(state.STATE.batches), [2, 2])
        self.assertEqual(state.STATE.batch_trained(state.STATE.step), 2)
        state.STATE.submitted()
        self.assertEqual(next(it), epoch0[4:6])  # the step before was submitted: it takes one
        self.assertEqual(worker.names(), ["begin_training", "next_step", "next_step"])
        self.assertEqual(list(it), [])

    def test_batches_asked_ahead_keep_the_size_they_had(self):
        # Hetero batching: the tuner's new size (1) reaches the batches one step late, and
        # step() counts each batch's own samples.
        self.join([step(0, 0, 0, 3, 2, [0, 1]), step(1, 0, 1, 3, 1, [0, 1]),
                   step(2, 0, 2, 3, 1, [0, 1])], hetero_batching=True)
        it = iter(r2t.DistributedSampler(12))
        sizes, trained = [], []
        sizes.append(len(next(it)))           # step 0's batch of 2
        sizes.append(len(next(it)))           # asked ahead: still 2
        trained.append(state.STATE.batch_trained(state.STATE.step))
        state.STATE.submitted()
        step1 = state.STATE.next_step("test")  # the optimizer's step() takes step 1 (batch 1)
        sizes.append(len(next(it)))           # asked ahead of step 1: its size, 1
        trained.append(state.STATE.batch_trained(step1))
        state.STATE.submitted()
        step2 = state.STATE.next_step("test")
        trained.append(state.STATE.batch_trained(step2))
        state.STATE.submitted()
        self.assertEqual((sizes, trained), ([2, 2, 1], [2, 2, 1]))
        self.assertEqual(list(it), [])

    def test_bad_arguments(self):
        cases = [(TypeError, lambda: r2t.DistributedSampler(object()),
                  "r2sp.torch.DistributedSampler: pass the training set (with a len()) or its "
                  "size, not object"),
                 (ValueError, lambda: r2t.DistributedSampler([]),
                  "r2sp.torch.DistributedSampler: the training set is empty (0 samples)"),
                 (TypeError, lambda: r2t.DistributedSampler(10, seed="1"),
                  "r2sp.torch.DistributedSampler: seed must be an integer, not '1'")]
        for error, make, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(error) as e:
                    make()
                self.assertEqual(str(e.exception), message)

    def test_a_shard_without_samples(self):
        self.join([step(0, 0, 0, 1, 2, [0, 1, 2])], data_world=3, data_shard=2)
        with self.assertRaises(ValueError) as e:
            self.epoch(r2t.DistributedSampler(2))
        self.assertEqual(str(e.exception), "r2sp.torch.DistributedSampler: a training set of 2 "
                                           "samples has none for data shard 2 of 3; every "
                                           "worker needs samples")

    def test_a_dataloader_takes_its_batches(self):
        import torch
        self.join([step(0, 0, 0, 1, 3, [0, 1])])
        data = torch.utils.data.TensorDataset(torch.arange(10.0))
        loader = torch.utils.data.DataLoader(data, batch_sampler=r2t.DistributedSampler(data))
        got = []
        for (x,) in loader:
            got.append(x.tolist())
            state.STATE.submitted()
        self.assertEqual(got, [[8.0, 2.0, 0.0]])

    def test_a_dataloader_with_workers_takes_the_epochs_batches(self):
        import torch
        steps = [step(c, c // 3, c % 3, 3, 2, [0, 1]) for c in range(6)]
        self.join(steps)
        data = torch.utils.data.TensorDataset(torch.arange(12.0))
        sampler = r2t.DistributedSampler(data)
        loader = torch.utils.data.DataLoader(data, batch_sampler=sampler, num_workers=2,
                                             prefetch_factor=2, persistent_workers=True)
        epochs = []
        for _ in range(2):
            got = []
            for (x,) in loader:
                got.append(x.tolist())
                current = state.STATE.step or state.STATE.next_step("test")  # as step() does
                self.assertEqual(state.STATE.batch_trained(current), 2)
                state.STATE.submitted()
            epochs.append(got)
        want = [order(range(0, 12, 2), 1, e, 0) for e in (0, 1)]
        self.assertEqual(epochs, [[[float(i) for i in w[b:b + 2]] for b in (0, 2, 4)]
                                  for w in want])
        self.assertEqual(state.STATE.worker.names().count("next_step"), 6)


@unittest.skipIf(SKIP, SKIP or "")
class EpochBatchesTest(unittest.TestCase):
    """r2sp.torch.epoch_batches: DistributedSampler's batches with fixed batches and every
    worker live, without a job."""

    def setUp(self):
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"})

    def tearDown(self):
        state.STATE.__init__()

    def test_the_samplers_batches_epoch_after_epoch(self):
        # Shard 1 of 2 over 11 samples has 5 (the fewest; shard 0 has 6): 2 steps of 2.
        steps = [step(c, c // 2, c % 2, 2, 2, [0, 1]) for c in range(4)]
        state.STATE.worker = r2sp_testing.FakeWorker([], [("w", [1])], steps=steps,
                                                     data_world=2, data_shard=1, batch_size=2)
        sampler = r2t.DistributedSampler(11, seed=7)
        for epoch in (0, 1):
            got = []
            for batch in sampler:
                got.append(batch)
                state.STATE.submitted()
            self.assertEqual(got, r2t.epoch_batches(11, 2, 1, 2, epoch, 7))
            self.assertEqual(got, [order([1, 3, 5, 7, 9], 7, epoch, 1)[:2],
                                   order([1, 3, 5, 7, 9], 7, epoch, 1)[2:4]])

    def test_every_shard_as_many_steps_as_the_smallest(self):
        self.assertEqual(r2t.epoch_batches(11, 2, 0, 2, 0, 1),
                         [order([0, 2, 4, 6, 8, 10], 1, 0, 0)[:2],
                          order([0, 2, 4, 6, 8, 10], 1, 0, 0)[2:4]])
        self.assertEqual(r2t.epoch_batches(10, 2, 0, 2, 1, 1), [[2, 6], [4, 8]])

    def test_a_batch_larger_than_the_shard_takes_the_next_passes(self):
        self.assertEqual(r2t.epoch_batches(4, 2, 1, 5, 0, 1),
                         [order([1, 3], 1, 0, 1) + order([1, 3], 1, 1, 1) +
                          order([1, 3], 1, 2, 1)[:1]])

    def test_bad_values(self):
        cases = [(TypeError, (10, 2, 0, 2, 0, 1.0),
                  "r2sp.torch.epoch_batches: seed must be an integer, not 1.0"),
                 (TypeError, (10, True, 0, 2, 0, 1),
                  "r2sp.torch.epoch_batches: world must be an integer, not True"),
                 (ValueError, (10, 2, 0, 0, 0, 1),
                  "r2sp.torch.epoch_batches: needs size, world and batch_size of at least 1 "
                  "and epoch and seed not negative (size=10, world=2, batch_size=0, epoch=0, "
                  "seed=1)"),
                 (ValueError, (10, 2, 0, 2, -1, 1),
                  "r2sp.torch.epoch_batches: needs size, world and batch_size of at least 1 "
                  "and epoch and seed not negative (size=10, world=2, batch_size=2, epoch=-1, "
                  "seed=1)"),
                 (ValueError, (10, 2, 2, 2, 0, 1),
                  "r2sp.torch.epoch_batches: rank 2 is not one of 0..1"),
                 (ValueError, (2, 3, 2, 1, 0, 1),
                  "r2sp.torch.epoch_batches: a training set of 2 samples has none for shard "
                  "2 of 3")]
        for error, values, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(error) as e:
                    r2t.epoch_batches(*values)
                self.assertEqual(str(e.exception), message)


if __name__ == "__main__":
    junit_main.main()

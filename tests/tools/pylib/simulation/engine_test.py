"""tools/pylib/simulation/engine.py and the modes: iteration times computed by hand on one
10 MB/s server link (1 MB takes 0.1 s) with no overheads, r2sp's slots, determinism."""

import random
import unittest

from pylib.simulation.engine import Simulation
from pylib.simulation.scenario import Calibration, Scenario
import junit_main

EXACT = Calibration(link_efficiency=1.0, op_overhead_s=0.0, control_s=0.0,
                    server_cpu_s_per_byte=0.0)


def scenario(**kw):
    base = dict(workers=2, servers=1, model_bytes=1e6, compute_s=0.1, server_link_bps=80e6,
                latency_s=0.0, iterations=6, skip=2, calibration=EXACT)
    base.update(kw)
    return Scenario(**base)


class HandComputedTest(unittest.TestCase):
    def test_bsp_two_equal_workers(self):
        # Both compute 0.1 s; pushes queue on the link (0.1-0.2, 0.2-0.3); the clock is
        # complete at 0.3; pulls queue (0.3-0.4, 0.4-0.5). Worker 0 then computes to 0.5 and
        # pushes 0.5-0.6 while worker 1 computes to 0.6: every 0.4 s both iterate once.
        sim = Simulation(scenario(mode="bsp"))
        r = sim.run()
        self.assertEqual([round(t, 9) for t in sim.workers[0].ends], [0.4, 0.8, 1.2, 1.6, 2.0, 2.4])
        self.assertEqual([round(t, 9) for t in sim.workers[1].ends], [0.5, 0.9, 1.3, 1.7, 2.1, 2.5])
        self.assertAlmostEqual(r.iterations_per_s, 5.0)
        self.assertAlmostEqual(r.mean_iteration_s, 0.4)
        self.assertAlmostEqual(r.mean_wait_s, 0.05)   # worker 0 waits 0.1 s for the clock

    def test_r2sp_two_equal_workers(self):
        # Slots hand over after each push, so a worker's pull overlaps the other's push: each
        # iteration is compute + push + pull = 0.3 s.
        sim = Simulation(scenario(mode="r2sp"))
        r = sim.run()
        self.assertEqual([round(t, 9) for t in sim.workers[0].ends], [0.3, 0.6, 0.9, 1.2, 1.5, 1.8])
        self.assertAlmostEqual(r.iterations_per_s, 2 / 0.3, places=3)

    def test_asp_one_worker(self):
        r = Simulation(scenario(mode="asp", workers=1)).run()
        self.assertAlmostEqual(r.mean_iteration_s, 0.3)
        self.assertEqual(r.mean_wait_s, 0.0)

    def test_fp16_halves_the_transfers(self):
        r = Simulation(scenario(mode="asp", workers=1, push_codec="fp16",
                                pull_codec="fp16")).run()
        self.assertAlmostEqual(r.mean_iteration_s, 0.2)

    def test_overlap_pushes_in_backward_and_pulls_into_forward(self):
        # One worker, 0.3 s compute: the first push starts with backward (at 0.1) and is acked
        # at 0.3, when compute ends; the pull (0.3-0.4) runs into the next forward, whose compute
        # ends no sooner than 0.4 + backward (0.2) + forward's last slice (0.1 / 16) = 0.60625;
        # its push's last slice (a sixteenth of the previous push's 0.2 s) lands at 0.61875.
        sim = Simulation(scenario(mode="asp", workers=1, compute_s=0.3, overlap=True))
        sim.run()
        w = sim.workers[0]
        self.assertAlmostEqual(w.ends[0], 0.3)
        self.assertAlmostEqual(w.ends[1], 0.61875)
        no_overlap = Simulation(scenario(mode="asp", workers=1, compute_s=0.3)).run()
        self.assertAlmostEqual(no_overlap.mean_iteration_s, 0.5)

    def test_hetero_batching_sizes_by_speed(self):
        r = Simulation(scenario(mode="r2sp", workers=4, slowdown=[1, 1, 1, 2], hetero=True,
                                ms_per_sample=1.0, compute_s=0.0, batch=64)).run()
        self.assertEqual(r.batches, [73, 73, 73, 37])

    def test_eawild_exchanges_every_period(self):
        # One worker, period 4: three steps of 0.1 s, then one of 0.1 + pull 0.1 + push 0.1.
        sim = Simulation(scenario(mode="eawild", workers=1, iterations=8, skip=0))
        sim.run()
        self.assertEqual([round(t, 9) for t in sim.workers[0].ends],
                         [0.1, 0.2, 0.3, 0.6, 0.7, 0.8, 0.9, 1.2])

    def test_easgd_waits_for_the_round(self):
        # Worker 1 computes 3x slower: worker 0's second exchange waits for its first.
        sim = Simulation(scenario(mode="easgd", slowdown=[1.0, 3.0], iterations=8, skip=0,
                                  elastic_period=2))
        sim.run()
        w0, w1 = sim.workers
        # w1's first difference is in at 0.3 + 0.3 + 0.1 (pull) + 0.1 (push) = 0.8 s.
        self.assertAlmostEqual(w1.ends[1], 0.8)
        self.assertGreaterEqual(w0.ends[3], 0.8 + 0.1 + 0.1)
        self.assertGreater(sum(w0.wait_s), 0.0)

    def test_ssp_bounds_the_lead(self):
        sim = Simulation(scenario(mode="ssp", slowdown=[1.0, 10.0], staleness=1, iterations=5,
                                  skip=0))
        sim.run()
        fast, slow = sim.workers
        # The fast worker may finish clock c+1 only once the slow one has pushed clock c.
        for c in range(1, 4):
            self.assertGreaterEqual(fast.ends[c], slow.ends[c - 1] - 0.1)


class SlotTest(unittest.TestCase):
    def spans(self, **kw):
        sim = Simulation(scenario(mode="r2sp", workers=8, compute_cv=0.3, iterations=12, **kw))
        sim.run()
        return sorted(sim.mode.spans)

    def test_r2sp_pushes_never_overlap(self):
        for order in ("ring", "first_come"):
            spans = self.spans(r2sp_order=order)
            self.assertEqual(len(spans), 8 * 12)
            for (_, end), (start, _) in zip(spans, spans[1:]):
                self.assertGreaterEqual(start, end - 1e-12, order)

    def test_width_two_lets_two_overlap_never_three(self):
        spans = self.spans(slot_width=2)
        most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
        self.assertEqual(most, 2)


class DeterminismTest(unittest.TestCase):
    def test_same_seed_same_result(self):
        def run(seed):  # compute-bound, so the draws show in the rate
            return Simulation(scenario(mode="r2sp", workers=6, compute_cv=0.2, seed=seed,
                                       compute_s=2.0)).run()
        a, b, c = run(5), run(5), run(6)
        self.assertEqual(a, b)
        self.assertNotEqual(a.iterations_per_s, c.iterations_per_s)

    def test_bad_scenario_says_what_to_fix(self):
        with self.assertRaisesRegex(ValueError, "one slowdown per worker"):
            Simulation(scenario(slowdown=[1.0]))



class SharedHostTest(unittest.TestCase):
    def test_shares_queue_for_the_host_cores(self):
        # One asp worker, 2 servers of 1 MiB each, unlimited links: a push or pull costs each
        # share 1 MiB x 1 ns of the host's CPU. On 1 core the two shares run one after the
        # other (2.097152 ms), on 2 side by side (1.048576 ms); compute 1 s.
        for cores, op_s in ((1, 2 * 2**20 * 1e-9), (2, 2**20 * 1e-9)):
            cal = Calibration(link_efficiency=1.0, op_overhead_s=0.0, control_s=0.0,
                              server_cpu_s_per_byte=0.0, host_cores=cores,
                              host_cpu_s_per_byte=1e-9)
            sim = Simulation(scenario(mode="asp", workers=1, servers=2, model_bytes=2 * 2**20,
                                      partition_bytes=2**20, compute_s=1.0, server_link_bps=None,
                                      calibration=cal))
            sim.run()
            ends = sim.workers[0].ends
            with self.subTest(cores=cores):
                self.assertAlmostEqual(ends[0], 1.0 + 2 * op_s, places=12)
                self.assertAlmostEqual(ends[5] - ends[4], 1.0 + 2 * op_s, places=12)
                self.assertAlmostEqual(sim.host.busy_s, 6 * 2 * 2 * 2**20 * 1e-9, places=9)

    def test_a_bsp_release_on_one_host_serves_each_server_in_its_own_order(self):
        # 8 workers, 4 servers of 1 MB on 1 core at 1 ns a byte: each pull share costs 1 ms.
        # The servers take turns (0, 1, 2, 3, 0, ...), each through its own shuffle of the
        # workers: the k-th round's share of server s is served at (4k + s + 1) ms.
        cal = Calibration(link_efficiency=1.0, op_overhead_s=0.0, control_s=0.0,
                          server_cpu_s_per_byte=0.0, host_cores=1, host_cpu_s_per_byte=1e-9)
        sim = Simulation(scenario(mode="bsp", workers=8, servers=4, model_bytes=4e6,
                                  partition_bytes=1e6, server_link_bps=None, calibration=cal))
        served = sim.net.serve_released(sim.workers, 0.0, 0.0, random.Random(7))
        rng = random.Random(7)
        orders = [rng.sample(sim.workers, 8) for _ in range(4)]
        for s, order in enumerate(orders):
            for k, w in enumerate(order):
                self.assertAlmostEqual(served[w.rank][s], (4 * k + s + 1) * 1e-3, places=12)
        # Worker by worker (as a machine per server would serve it) worker 0 would be done at
        # 4 ms; here a pull is done when its last share is, mostly near the 32 ms burst's end.
        done = sorted(round(max(v.values()) * 1e3) for v in served.values())
        self.assertEqual(done, [13, 17, 25, 27, 28, 29, 30, 32])   # mean 25 ms against 18

    def test_without_a_host_each_server_has_its_core(self):
        sim = Simulation(scenario(mode="asp"))
        self.assertIsNone(sim.host)
        self.assertIsNot(sim.servers[0].cpu, Simulation(scenario(mode="asp")).servers[0].cpu)

if __name__ == "__main__":
    junit_main.main()

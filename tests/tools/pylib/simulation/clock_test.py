"""tools/pylib/simulation/clock.py: callbacks run in time order, ties in scheduling order."""

import unittest

from pylib.simulation.clock import EventLoop
import junit_main


class EventLoopTest(unittest.TestCase):
    def test_time_order_then_scheduling_order(self):
        loop, seen = EventLoop(), []
        loop.at(2.0, lambda: seen.append(("b", loop.now)))
        loop.at(1.0, lambda: seen.append(("a", loop.now)))
        loop.at(2.0, lambda: seen.append(("c", loop.now)))
        loop.run(100)
        self.assertEqual(seen, [("a", 1.0), ("b", 2.0), ("c", 2.0)])
        self.assertEqual(loop.events, 3)

    def test_the_past_runs_now(self):
        loop, seen = EventLoop(), []
        loop.at(5.0, lambda: loop.at(1.0, lambda: seen.append(loop.now)))
        loop.run(100)
        self.assertEqual(seen, [5.0])

    def test_endless_model_is_an_error(self):
        loop = EventLoop()

        def again():
            loop.at(loop.now + 1, again)
        loop.at(0.0, again)
        with self.assertRaisesRegex(RuntimeError, "did not finish within 10 events"):
            loop.run(10)


if __name__ == "__main__":
    junit_main.main()

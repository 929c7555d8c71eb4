"""tools/pylib/simulation/links.py: a link's transfer time, FIFO queueing, utilisation."""

import unittest

from pylib.simulation.links import Link, reserve
import junit_main


class LinkTest(unittest.TestCase):
    def test_single_transfer_time_is_exact(self):
        link = Link("l", rate_bps=80e6)  # 10 MB/s
        self.assertEqual(reserve(link, 1.0, 1e6, 1.0), (1.0, 1.1))
        self.assertAlmostEqual(link.busy_s, 0.1)
        self.assertEqual(link.bytes_sent, 1e6)

    def test_efficiency_stretches_the_transfer(self):
        link = Link("l", rate_bps=80e6)
        start, end = reserve(link, 0.0, 1e6, 0.8)
        self.assertEqual(start, 0.0)
        self.assertAlmostEqual(end, 0.125)

    def test_fifo_queues_behind_the_previous_transfer(self):
        link = Link("l", rate_bps=80e6)
        reserve(link, 0.0, 1e6, 1.0)
        start, end = reserve(link, 0.05, 2e6, 1.0)
        self.assertAlmostEqual(start, 0.1)
        self.assertAlmostEqual(end, 0.3)
        start, end = reserve(link, 1.0, 1e6, 1.0)   # idle again: starts at once
        self.assertEqual((start, end), (1.0, 1.1))

    def test_unlimited_link_takes_no_time(self):
        self.assertEqual(reserve(Link("l"), 2.0, 1e9, 1.0), (2.0, 2.0))


if __name__ == "__main__":
    junit_main.main()

"""tools/pylib/simulation/servers.py: the partitions' placement and a server's CPU queue."""

import unittest

from pylib.simulation.servers import Server, placement
import junit_main


class PlacementTest(unittest.TestCase):
    def test_even_split(self):
        self.assertEqual(placement(4.0, 1.0, 2), [0.5, 0.5])

    def test_largest_first_to_the_emptiest(self):
        # Partitions 1, 1 and 0.5 over 2 servers: 1 -> s0, 1 -> s1, 0.5 -> s0 (the lower index).
        self.assertEqual(placement(2.5, 1.0, 2), [0.6, 0.4])

    def test_more_servers_than_partitions_leaves_some_empty(self):
        self.assertEqual(placement(1.0, 1.0, 3), [1.0, 0.0, 0.0])


class ServerCpuTest(unittest.TestCase):
    def test_work_queues_in_order(self):
        server = Server(0, None, 0.0, 1.0)
        self.assertEqual(server.work(1.0, 0.5), 1.5)
        self.assertEqual(server.work(1.2, 0.5), 2.0)   # waits for the first
        self.assertEqual(server.work(3.0, 0.25), 3.25)
        self.assertEqual(server.cpu_busy_s, 1.25)


if __name__ == "__main__":
    junit_main.main()

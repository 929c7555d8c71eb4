"""tools/pylib/simulation/host.py: a core of its own, and a host's cores shared by servers."""

import unittest

from pylib.simulation.host import Cpu, HostCpu
from pylib.simulation.servers import Server
import junit_main


class CpuTest(unittest.TestCase):
    def test_fifo(self):
        cpu = Cpu()
        self.assertEqual(cpu.work(1.0, 0.5), 1.5)
        self.assertEqual(cpu.work(1.2, 0.5), 2.0)
        self.assertEqual(cpu.busy_s, 1.0)


class HostCpuTest(unittest.TestCase):
    def test_work_goes_to_the_core_free_first(self):
        host = HostCpu(2)
        self.assertEqual(host.work(0.0, 1.0), 1.0)    # core 0
        self.assertEqual(host.work(0.0, 1.0), 1.0)    # core 1, in parallel
        self.assertEqual(host.work(0.0, 0.5), 1.5)    # both busy: core 0 after its first
        self.assertEqual(host.work(0.25, 1.0), 2.0)   # core 1 is free first (at 1.0)
        self.assertEqual(host.busy_s, 3.5)

    def test_one_core_is_a_queue(self):
        host = HostCpu(1)
        self.assertEqual([host.work(0.0, 0.25) for _ in range(3)], [0.25, 0.5, 0.75])

    def test_servers_on_one_host_share_it(self):
        host = HostCpu(1)
        a, b = Server(0, None, 0.0, 0.5, host), Server(1, None, 0.0, 0.5, host)
        self.assertEqual(a.work(0.0, 1.0), 1.0)
        self.assertEqual(b.work(0.0, 1.0), 2.0)     # waits for a's work on the one core
        self.assertEqual((a.cpu_busy_s, b.cpu_busy_s), (1.0, 1.0))
        alone = Server(2, None, 0.0, 0.5)           # a core of its own
        self.assertEqual(alone.work(0.0, 1.0), 1.0)

    def test_no_cores(self):
        with self.assertRaisesRegex(ValueError, "at least 1 core"):
            HostCpu(0)


if __name__ == "__main__":
    junit_main.main()

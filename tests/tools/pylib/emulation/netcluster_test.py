"""tools/pylib/netcluster.py without root: rate parsing, hosts' names and addresses, and the
checks that say why a machine cannot run a cluster. tests/tools/netcluster_test.cc builds a
real one."""

import unittest
from unittest import mock

import junit_main
from pylib.emulation import netcluster


class ParseRateTest(unittest.TestCase):
    def test_units(self):
        self.assertEqual(netcluster.parse_rate("50mbit"), 50e6)
        self.assertEqual(netcluster.parse_rate("1gbit"), 1e9)
        self.assertEqual(netcluster.parse_rate("800kbit"), 800e3)
        self.assertEqual(netcluster.parse_rate("9600bit"), 9600)

    def test_fractions_and_case(self):
        self.assertEqual(netcluster.parse_rate("1.5Mbit"), 1.5e6)
        self.assertEqual(netcluster.parse_rate("2GBIT"), 2e9)

    def test_bad_rates(self):
        for text in ("", "50", "50mbps", "mbit", "fastmbit", "0mbit", "-5mbit", "nanmbit",
                     "infgbit", "50 mbit x"):
            with self.subTest(text=text), self.assertRaisesRegex(ValueError, "bad rate"):
                netcluster.parse_rate(text)


class TbfOptionsTest(unittest.TestCase):
    def test_undilated_link(self):
        # 4 ms of 1 Gbit/s is 500,000 bytes of bucket; the queue 100 ms.
        self.assertEqual(netcluster.tbf_options("1gbit"),
                         ["rate", "1000000000bit", "burst", "500000", "latency", "100ms"])

    def test_a_slow_links_bucket_is_at_least_32_kb(self):
        self.assertEqual(netcluster.tbf_options("50mbit"),
                         ["rate", "50000000bit", "burst", "32768", "latency", "100ms"])

    def test_dilated_link_is_slower_with_the_same_bucket_and_queue_in_bytes(self):
        self.assertEqual(netcluster.tbf_options("419mbit", 5),
                         ["rate", "83800000bit", "burst", "209500", "latency", "500ms"])
        self.assertEqual(netcluster.tbf_options("1gbit", 2.5),
                         ["rate", "400000000bit", "burst", "500000", "latency", "250ms"])


class ClusterTest(unittest.TestCase):
    def test_hosts_names_and_addresses(self):
        cluster = netcluster.Cluster(["scheduler", "server0", "worker0"], {"server0": "100mbit"})
        self.assertTrue(cluster.tag.startswith(netcluster.PREFIX))
        self.assertEqual(cluster.addresses, {"scheduler": "198.18.0.10", "server0": "198.18.0.11",
                                             "worker0": "198.18.0.12"})
        self.assertEqual(cluster.ns("worker0"), cluster.tag + "-worker0")
        self.assertEqual(cluster.bridge_port("worker0"), "p2")
        self.assertEqual(cluster.exec_prefix("server0"),
                         ["ip", "netns", "exec", cluster.tag + "-server0"])

    def test_a_colocated_host_shares_its_machines_namespace_address_and_link(self):
        cluster = netcluster.Cluster(["scheduler", "worker0", "worker1"],
                                     {"worker0": "1gbit", "worker1": "1gbit"},
                                     colocated={"server0": "worker0"})
        self.assertEqual(cluster.addresses["server0"], "198.18.0.11")
        self.assertEqual(cluster.ns("server0"), cluster.tag + "-worker0")
        self.assertEqual(cluster.bridge_port("server0"), "p1")
        self.assertEqual(cluster.exec_prefix("server0"), cluster.exec_prefix("worker0"))
        self.assertEqual(cluster.placement()["server0"],
                         {"machine": "worker0", "namespace": cluster.tag + "-worker0",
                          "address": "198.18.0.11", "link": "1gbit", "time_dilation": 1.0})
        self.assertEqual(sorted(cluster.placement()),
                         ["scheduler", "server0", "worker0", "worker1"])
        self.assertEqual(cluster.placement()["scheduler"]["link"], None)

    def test_a_dilated_links_rate_and_delay(self):
        cluster = netcluster.Cluster(["worker0"], {"worker0": "419mbit"}, delay_ms=0.5,
                                     time_dilation=5)
        ok = mock.Mock(returncode=0)
        with mock.patch.object(netcluster, "run", return_value=ok) as run:
            cluster.shape("ns0", "eth0", "419mbit")
        tc = ["ip", "netns", "exec", "ns0", "tc", "qdisc", "replace", "dev", "eth0"]
        self.assertEqual(run.call_args_list, [
            mock.call(tc + ["root", "handle", "1:", "netem", "delay", "2.5ms", "limit", "10000"],
                      check=False),
            mock.call(tc + ["parent", "1:1", "handle", "10:", "tbf", "rate", "83800000bit",
                            "burst", "209500", "latency", "500ms"])])
        self.assertEqual(cluster.placement()["worker0"]["time_dilation"], 5)
        self.assertEqual(cluster.placement()["worker0"]["link"], "419mbit")

    def test_a_failed_command_is_a_cluster_error(self):
        with self.assertRaisesRegex(netcluster.ClusterError, "false: "):
            netcluster.run(["false"])
        self.assertEqual(netcluster.run(["false"], check=False).returncode, 1)


class CanRunTest(unittest.TestCase):
    def test_needs_root(self):
        with mock.patch("os.geteuid", return_value=1000):
            self.assertIn("needs root", netcluster.can_run())


if __name__ == "__main__":
    junit_main.main()

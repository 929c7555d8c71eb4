"""tools/pylib/supervisor.py: --max_restarts, process names and roles, a replacement's
arguments. The supervision itself runs on stand-in binaries in launcher_test."""

import unittest

import junit_main
from pylib.job import supervisor


class ParseMaxRestartsTest(unittest.TestCase):
    def test_a_bare_count_is_for_workers(self):
        self.assertEqual(supervisor.parse_max_restarts("0"), {"worker": 0, "server": 0})
        self.assertEqual(supervisor.parse_max_restarts("3"), {"worker": 3, "server": 0})

    def test_per_role(self):
        self.assertEqual(supervisor.parse_max_restarts("worker:2,server:0"), {"worker": 2, "server": 0})
        self.assertEqual(supervisor.parse_max_restarts(" worker : 5 "), {"worker": 5, "server": 0})
        self.assertEqual(supervisor.parse_max_restarts("server:0"), {"worker": 0, "server": 0})

    def test_bad_forms(self):
        for text in ("", "-1", "1.5", "x", "worker", "worker:", "worker:-1", "gpu:1",
                     "scheduler:1", "worker:1;server:0", "worker:1,"):
            with self.subTest(text=text), self.assertRaisesRegex(ValueError, "bad --max_restarts"):
                supervisor.parse_max_restarts(text)

    def test_servers_are_replaced_too(self):
        self.assertEqual(supervisor.parse_max_restarts("worker:1,server:2"),
                         {"worker": 1, "server": 2})
        self.assertIn("server", supervisor.ROLES_REPLACED)


class NamesTest(unittest.TestCase):
    def test_slot_and_role(self):
        for name, slot, role in (("scheduler", "scheduler", "scheduler"),
                                 ("server12", "server12", "server"),
                                 ("worker1", "worker1", "worker"),
                                 ("worker1.r2", "worker1", "worker")):
            with self.subTest(name=name):
                self.assertEqual((supervisor.slot(name), supervisor.role(name)), (slot, role))

    def test_a_replacement_writes_metrics_and_timeline_of_its_own(self):
        argv = ["/b/worker/worker", "--scheduler=tcp://h:1", "--metrics=/r/metrics_worker1.jsonl",
                "--timeline=/r/timeline_worker1.json", "--threads=2"]
        self.assertEqual(supervisor.replacement_argv(argv, "/r", "worker1.r2"),
                         ["/b/worker/worker", "--scheduler=tcp://h:1",
                          "--metrics=/r/metrics_worker1.r2.jsonl",
                          "--timeline=/r/timeline_worker1.r2.json", "--threads=2"])


if __name__ == "__main__":
    junit_main.main()

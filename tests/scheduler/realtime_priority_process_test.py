"""scheduler --realtime_priority on the real binary: with CAP_SYS_NICE every scheduler thread
runs under SCHED_FIFO at the priority given; without it (setpriv drops the capability, and
RLIMIT_RTPRIO is 0) the scheduler refuses to start, saying what it needs, before it listens."""

import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import junit_main

SCHEDULER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scheduler",
                         "scheduler")
SCHED_FIFO = 1  # /proc/PID/stat's policy field


def command(tmp, priority):
    return [SCHEDULER, "--bind=tcp://127.0.0.1:*", f"--endpoint_file={tmp}/endpoint",
            f"--realtime_priority={priority}", "--num_servers=1", "--num_workers=1",
            "--register_timeout_s=60"]


def thread_policies(pid):
    """(rt_priority, policy) of each of the process's threads, from /proc."""
    policies = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)"
        policies.append((int(fields[37]), int(fields[38])))  # stat fields 40 and 41
    return policies


def may_use_realtime():
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


class RealtimePriorityProcessTest(unittest.TestCase):
    def test_without_cap_sys_nice_the_scheduler_refuses_to_start(self):
        if resource.getrlimit(resource.RLIMIT_RTPRIO)[0] != 0:
            self.skipTest("RLIMIT_RTPRIO lets an unprivileged process use SCHED_FIFO here")
        dropped = []  # this process lacks the privilege already (a container without it)
        if may_use_realtime():
            if shutil.which("setpriv") is None:
                self.skipTest("needs setpriv (util-linux) to drop CAP_SYS_NICE")
            dropped = ["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice", "--"]
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run(dropped + command(tmp, 10), capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertEqual(p.stderr.splitlines()[-1],
                             "scheduler: error: --realtime_priority=10 needs CAP_SYS_NICE: run "
                             "the scheduler as root, grant it (setcap cap_sys_nice+ep "
                             "scheduler), or leave the flag at 0")
            self.assertFalse(os.path.exists(f"{tmp}/endpoint"))  # it never listened

    def test_with_cap_sys_nice_every_thread_runs_under_sched_fifo(self):
        if not may_use_realtime():
            self.skipTest("this process may not use SCHED_FIFO (no CAP_SYS_NICE)")
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.Popen(command(tmp, 7), stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 30
                while not os.path.exists(f"{tmp}/endpoint") and time.monotonic() < deadline:
                    self.assertIsNone(p.poll(), "the scheduler exited")
                    time.sleep(0.05)
                self.assertTrue(os.path.exists(f"{tmp}/endpoint"))
                policies = thread_policies(p.pid)
                self.assertGreater(len(policies), 1)  # ZeroMQ's I/O thread(s) as well
                self.assertEqual(set(policies), {(7, SCHED_FIFO)})
            finally:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)


if __name__ == "__main__":
    junit_main.main()

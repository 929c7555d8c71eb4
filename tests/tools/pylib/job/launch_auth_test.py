"""tools/launch --auth=curve with the real binaries (CurveZMQ, docs/SECURITY.md): a bsp job of the
synthetic model completes with the keys the launcher made (RUN_DIR/keys 0700, secret keys 0600)
and no key in any other file of the run directory; while it runs, a worker holding the job's
public keys but a worker key pair of its own, and a worker without CURVE, are both refused and
never registered; and a process whose secret key file others may read refuses to start (exit 2,
naming the file and its mode). Skipped where the binaries are not built."""

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
LAUNCH = os.path.join(ROOT, "tools", "launch")
KEYGEN = os.path.join(BIN_DIR, "common", "auth", "keygen")
WORKER = os.path.join(BIN_DIR, "worker", "worker")
SYNTHETIC = "--model=synthetic --model_mb=1 --layers=4 --compute_ms=20 --log_every=1"


def cannot_run():
    missing = [p for p in (KEYGEN, WORKER, os.path.join(BIN_DIR, "scheduler", "scheduler"),
                           os.path.join(BIN_DIR, "server", "server")) if not os.access(p, os.X_OK)]
    return f"needs the built binaries: {', '.join(missing)}" if missing else None


def launch(run_dir, *flags):
    return subprocess.Popen([sys.executable, LAUNCH, "--bin_dir=" + BIN_DIR, "--quiet", "--auth=curve",
                             "--run_dir=" + run_dir, "--sync=bsp", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def keys_in(directory):
    """{file name: key text} of a keys directory."""
    keys = {}
    for name in os.listdir(directory):
        with open(os.path.join(directory, name)) as f:
            keys[name] = f.read().strip()
    return keys


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


@unittest.skipIf(cannot_run(), cannot_run() or "")
class LaunchAuthTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="launch_auth_")

    def test_curve_bsp_job_completes_and_no_key_leaves_the_keys_directory(self):
        run_dir = os.path.join(self.dir, "run")
        proc = launch(run_dir, "--servers=2", "--workers=2", f"--worker_flags={SYNTHETIC} --iterations=10")
        out, _ = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, out)
        s = summary(run_dir)
        self.assertEqual((s["completed"], s["auth"], s["iterations"], s["events"]), (True, "curve", 10, []))
        keys_dir = os.path.join(run_dir, "keys")
        self.assertEqual(mode(keys_dir), 0o700)
        keys = keys_in(keys_dir)
        self.assertEqual(sorted(keys), sorted(f"{r}.{k}" for r in ("scheduler", "server", "worker")
                                              for k in ("pub", "key")))
        for role in ("scheduler", "server", "worker"):
            self.assertEqual(mode(os.path.join(keys_dir, role + ".key")), 0o600)
            self.assertEqual(len(keys[role + ".key"]), 40)  # Z85
        for root, _, names in os.walk(run_dir):
            if root == keys_dir:
                continue
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                for key_file, key in keys.items():
                    self.assertNotIn(key.encode(), data, f"{key_file} in {os.path.join(root, name)}")
        for key in keys.values():
            self.assertNotIn(key, out)

    def test_a_worker_without_the_jobs_worker_key_is_refused(self):
        run_dir = os.path.join(self.dir, "guarded")
        proc = launch(run_dir, "--servers=1", "--workers=1", f"--worker_flags={SYNTHETIC} --iterations=400")
        try:
            endpoint_file = os.path.join(run_dir, "scheduler.endpoint")
            deadline = time.time() + 60
            while not (os.path.exists(endpoint_file) and open(endpoint_file).read().strip()):
                self.assertLess(time.time(), deadline, "the scheduler never wrote its endpoint")
                time.sleep(0.1)
            with open(endpoint_file) as f:
                endpoint = f.read().strip()
            # The job's public keys, but a worker key pair that is not the job's.
            own = os.path.join(self.dir, "own")
            subprocess.run([KEYGEN, own], check=True, capture_output=True)
            foreign = os.path.join(self.dir, "foreign")
            os.makedirs(foreign, mode=0o700)
            for name in ("scheduler.pub", "server.pub"):
                with open(os.path.join(run_dir, "keys", name)) as f, \
                        open(os.path.join(foreign, name), "w") as g:
                    g.write(f.read())
            for name in ("worker.pub", "worker.key"):
                with open(os.path.join(own, name)) as f, \
                        open(os.open(os.path.join(foreign, name), os.O_WRONLY | os.O_CREAT, 0o600), "w") as g:
                    g.write(f.read())
            intruder = [WORKER, "--scheduler=" + endpoint, "--bind=tcp://127.0.0.1:*",
                        "--register_timeout_s=3", *SYNTHETIC.split(), "--iterations=5"]
            for name, extra in (("foreign key", ["--auth=curve", "--keys_dir=" + foreign]),
                                ("no CURVE", [])):
                with self.subTest(intruder=name):
                    r = subprocess.run(intruder + extra, capture_output=True, text=True, timeout=60)
                    self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
                    self.assertIn("cannot join the job", r.stderr)
        finally:
            out, _ = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, out)
        s = summary(run_dir)
        self.assertEqual((s["completed"], s["workers"], s["iterations"]), (True, 1, 400))
        with open(os.path.join(run_dir, "scheduler.log")) as f:
            log = f.read()
        self.assertEqual(log.count("worker registered"), 1, log)
        self.assertIn("refused a connection", log)

    def test_a_secret_key_others_may_read_stops_the_process(self):
        keys = os.path.join(self.dir, "keys")
        subprocess.run([KEYGEN, keys], check=True, capture_output=True)
        os.chmod(os.path.join(keys, "worker.key"), 0o640)
        r = subprocess.run([WORKER, "--scheduler=tcp://127.0.0.1:1", "--auth=curve", "--keys_dir=" + keys,
                            "--register_timeout_s=1", *SYNTHETIC.split()],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(os.path.join(keys, "worker.key"), r.stderr)
        self.assertIn("0640", r.stderr)
        with open(os.path.join(keys, "worker.key")) as f:
            self.assertNotIn(f.read().strip(), r.stderr + r.stdout)


if __name__ == "__main__":
    junit_main.main()

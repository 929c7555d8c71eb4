"""tools/launch --worker_cmd with the real binaries: R2SP_WORKER_FLAGS holds exactly what a worker
needs. The Python worker here is the user's side of the contract only: a script that records its
environment and then runs the real worker binary with the flags R2SP_WORKER_FLAGS gives it, no
others. A mixed bsp job (worker0 the binary, worker1 the script) completes with the same figures
as a job of binaries, and so does a job of Python workers alone, both workers' spans in the
merged timeline. Then a Python worker of r2sp._core (the Python client's extension, found
through R2SP_CORE, its flags from R2SP_WORKER_FLAGS) beside a C++ worker, both pushing the synthetic
model's known gradients in bsp: they end with the same parameters, bit for bit, and the Python
worker's metrics and timeline reach the run directory and summary.json; the same with
--auth=curve (the Python worker's flags name the job's keys). Skipped where the binaries (or the
extension) are not built."""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
LAUNCH = os.path.join(ROOT, "tools", "launch")
WORKER = os.path.join(BIN_DIR, "worker", "worker")
SYNTHETIC = "--model=synthetic --model_mb=1 --layers=4 --iterations=6 --compute_ms=20 --log_every=1"
# The Python worker: records its environment into RECORD_DIR/RANK.json, then becomes the worker
# binary WORKER with the flags of R2SP_WORKER_FLAGS.
EXEC_WORKER = r'''
import json, os, shlex, sys
worker, record_dir = sys.argv[1:3]
with open(os.path.join(record_dir, os.environ["RANK"] + ".json"), "w") as f:
    json.dump({k: os.environ[k] for k in (
        "R2SP_SCHEDULER", "R2SP_WORKER_FLAGS", "R2SP_DATA_DIR", "R2SP_CORE", "RANK", "WORLD_SIZE",
        "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH") if k in os.environ}, f)
os.execv(worker, [worker] + shlex.split(os.environ["R2SP_WORKER_FLAGS"]))
'''


# A Python worker of r2sp._core: the C++ synthetic model's tensors (4096 floats in 2 layers), its
# known gradients, 48 training samples; writes OUT.params (the final parameters) and
# OUT.result.json (finish()'s figures). core_script.py OUT
CORE_SCRIPT = r'''
import json, os, shlex, sys
sys.path.insert(0, os.path.dirname(os.environ["R2SP_CORE"]))
import _core
out = sys.argv[1]
options = {}  # the job's worker flags as the worker's options
for flag in shlex.split(os.environ["R2SP_WORKER_FLAGS"]):
    name, eq, value = flag[2:].partition("=")
    options[name] = value if eq else True
worker = _core.Worker(options, [(n, s) for n, s in _core.synthetic_model(4096, 2)],
                      "known-gradients")
grads = memoryview(worker.grads).cast("B").cast("f")
worker.join()
worker.begin_training(48)
while True:
    step = worker.next_step()
    if step is None:
        break
    _core.fill_known_gradient(worker.rank, step.clock, grads)
    worker.gradient_ready(0, worker.size)
    worker.submit(step.batch, 1.0)
result = worker.finish()
with open(out + ".params", "wb") as f:
    f.write(bytes(memoryview(worker.params)))
with open(out + ".result.json", "w") as f:
    json.dump(result, f)
'''
# The C++ worker of the same model and gradients (6 steps of 4 samples, as 48 samples over two
# workers in batches of 4).
KNOWN = "--model=synthetic --model_mb=0.015625 --layers=2 --grad=known --init=zero --iterations=6"
CORE = os.path.join(BIN_DIR, "worker", "python", "_core.so")


def cannot_run():
    missing = [p for p in (WORKER, os.path.join(BIN_DIR, "scheduler", "scheduler"),
                           os.path.join(BIN_DIR, "server", "server")) if not os.access(p, os.X_OK)]
    return f"needs the built binaries: {', '.join(missing)}" if missing else None


@unittest.skipIf(cannot_run(), cannot_run() or "")
class LaunchPythonWorkersTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="launch_python_workers_")
        self.dir = self._tmp.name
        self.script = os.path.join(self.dir, "exec_worker.py")
        with open(self.script, "w") as f:
            f.write(EXEC_WORKER)
        self.records = os.path.join(self.dir, "records")
        os.makedirs(self.records)
        self.command = shlex.join([sys.executable, self.script, WORKER, self.records])

    def tearDown(self):
        self._tmp.cleanup()

    def argv(self, run_dir, *flags):
        return [sys.executable, LAUNCH, "--bin_dir=" + BIN_DIR, "--quiet", "--run_dir=" + run_dir,
                "--sync=bsp", "--servers=1", "--workers=2", "--worker_flags=" + SYNTHETIC,
                "--timeout=120", *flags]

    def launch(self, run_dir, *flags):
        r = subprocess.run(self.argv(run_dir, *flags), capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(run_dir, "summary.json")) as f:
            return json.load(f)

    def record(self, rank):
        with open(os.path.join(self.records, f"{rank}.json")) as f:
            return json.load(f)

    def test_a_mixed_job_trains_as_a_job_of_binaries(self):
        run_dir = os.path.join(self.dir, "mixed")
        summary = self.launch(run_dir, f"--worker_cmd_for=1:{self.command}")
        binaries = self.launch(os.path.join(self.dir, "binaries"))
        for key in ("completed", "mode", "workers", "iterations", "dead_workers", "deaths"):
            self.assertEqual(summary[key], binaries[key], key)
        self.assertEqual((summary["completed"], summary["iterations"]), (True, 6))
        self.assertEqual(os.listdir(self.records), ["1.json"])
        with open(os.path.join(run_dir, "scheduler.endpoint")) as f:
            endpoint = f.read().strip()
        env = self.record(1)
        flags = shlex.split(env.pop("R2SP_WORKER_FLAGS"))
        self.assertEqual(flags, [f"--scheduler={endpoint}", "--bind=tcp://127.0.0.1:*",
                                 f"--metrics={run_dir}/metrics_worker1.jsonl",
                                 f"--timeline={run_dir}/timeline_worker1.json"]
                         + shlex.split(SYNTHETIC))
        host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
        self.assertEqual(env.pop("PYTHONPATH").split(":")[0], os.path.join(ROOT, "worker", "python"))
        self.assertEqual(env, {"R2SP_SCHEDULER": endpoint, "RANK": "1", "WORLD_SIZE": "2",
                               "LOCAL_RANK": "1", "MASTER_ADDR": host, "MASTER_PORT": port,
                               "R2SP_CORE": os.path.join(BIN_DIR, "worker", "python", "_core.so")})
        for rank in (0, 1):
            with open(os.path.join(run_dir, f"metrics_worker{rank}.jsonl")) as f:
                self.assertEqual(sum('"event"' not in line for line in f), 6, rank)

    def test_a_job_of_python_workers_alone(self):
        run_dir = os.path.join(self.dir, "python")
        summary = self.launch(run_dir, f"--worker_cmd={self.command}")
        self.assertEqual((summary["completed"], summary["workers"], summary["iterations"],
                          summary["deaths"]), (True, 2, 6, {"worker": 0, "server": 0}))
        self.assertEqual(sorted(os.listdir(self.records)), ["0.json", "1.json"])
        self.assertEqual([self.record(r)["LOCAL_RANK"] for r in (0, 1)], ["0", "1"])
        with open(os.path.join(run_dir, "timeline.json")) as f:
            tids = {e.get("tid") for e in json.load(f)["traceEvents"] if e.get("name") == "push"}
        self.assertEqual(len(tids), 2)  # both workers' pushes in the merged timeline

@unittest.skipIf(cannot_run() or not os.path.exists(CORE),
                 cannot_run() or f"needs the extension {CORE} (bazel build //worker/python:_core.so)")
class CoreLaunchTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="launch_core_")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def test_a_python_worker_of_the_extension_beside_a_cpp_worker(self):
        self.assertEqual(self.run_beside_a_cpp_worker()["auth"], "none")

    def test_with_curve_the_python_worker_gets_the_jobs_keys(self):
        self.assertEqual(self.run_beside_a_cpp_worker("--auth=curve")["auth"], "curve")

    def run_beside_a_cpp_worker(self, *flags):
        """Runs the job of the test above (with `flags` for tools/launch); its summary."""
        script, run_dir = os.path.join(self.dir, "core_script.py"), os.path.join(self.dir, "run")
        with open(script, "w") as f:
            f.write(CORE_SCRIPT)
        cpp_params, out = os.path.join(self.dir, "cpp.params"), os.path.join(self.dir, "py")
        r = subprocess.run([
            sys.executable, LAUNCH, "--bin_dir=" + BIN_DIR, "--quiet", "--run_dir=" + run_dir,
            "--sync=bsp", "--servers=1", "--workers=2", "--timeout=120",
            "--server_flags=--lr=0.1 --momentum=0.9 --heartbeat_ms=200",
            "--worker_flags=--batch_size=4 --heartbeat_ms=200",
            f"--worker_flags_for=0:{KNOWN} --dump_params={cpp_params}",
            "--worker_cmd_for=1:" + shlex.join([sys.executable, script, out]), *flags],
            capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(cpp_params, "rb") as f:
            expected = f.read()
        self.assertEqual(len(expected), 4096 * 4)
        self.assertNotEqual(expected, bytes(len(expected)))
        with open(out + ".params", "rb") as f:
            self.assertEqual(f.read(), expected)
        with open(out + ".result.json") as f:
            result = json.load(f)
        self.assertEqual((result["steps"], result["samples"], result["epochs"]), (6, 24, 1))
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["completed"], summary["workers"], summary["iterations"],
                          summary["deaths"]), (True, 2, 6, {"worker": 0, "server": 0}))
        with open(os.path.join(run_dir, "metrics_worker1.jsonl")) as f:
            rows = [json.loads(line) for line in f if '"event"' not in line]
        self.assertEqual([row["batch"] for row in rows], [4] * 6)
        with open(os.path.join(run_dir, "timeline.json")) as f:
            spans = [(e["tid"], e["name"]) for e in json.load(f)["traceEvents"]
                     if e.get("name") in ("compute", "push", "pull")]
        self.assertEqual(sorted(set(spans)), [(t, n) for t in (0, 1)
                                              for n in ("compute", "pull", "push")])
        self.assertEqual(len(spans), 2 * 3 * 6)
        return summary


if __name__ == "__main__":
    junit_main.main()

"""tools/package --wheel (tools/pylib/cluster/wheel.py) from the built binaries: the wheel's
name carries the version and the extension's Python; it holds the r2sp package with its
extensions (their RPATH the wheel's own lib/), the scheduler and server (executable; no worker
binary: the workers are scripts), the launcher's
library, and dist-info whose RECORD hashes every file. Installed offline into a fresh venv that
sees Debian's torch, `import r2sp.torch` works from any directory with no variables set, and
r2sp-run --standalone trains examples/pytorch/fashion_mnist_cnn.py with 2 workers on tiny
idx files and writes summary.json; so does a wheel for the PyTorch 2 root's Python 3.13 with
torch 2.6 (tools/torch2_root). Skipped where the binaries, the extension or torch are not
there."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
sys.path.insert(0, os.path.join(ROOT, "tests", "tools", "pylib"))
from idx_files import write_idx  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's, with torch: what the extension is built for
with open(os.path.join(ROOT, "VERSION")) as f:
    VERSION = f.read().strip()
# The PyTorch 2 root's Python itself (tools/torch2_python would add the checkout's package).
ROOT_PYTHON = os.path.join(os.environ.get("R2SP_TORCH2_ROOT", "/var/cache/r2sp/torch2_root/trixie"),
                           "usr", "local", "bin", "r2sp-python3")
CLEAN = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "R2SP_CORE", "R2SP_BIN_DIR", "R2SP_SCHEDULER")}


def missing():
    needs = [os.path.join(BIN_DIR, "worker", "python", "_core.so"), PYTHON] + \
        [os.path.join(BIN_DIR, r, r) for r in ("scheduler", "server", "worker")]
    gone = [p for p in needs if not os.path.exists(p)]
    if gone:
        return "needs " + ", ".join(gone)
    if subprocess.run([PYTHON, "-c", "import torch, venv, ensurepip"],
                      capture_output=True).returncode != 0:
        return f"needs torch and venv with pip in {PYTHON}"
    return None


def python_tag():
    return subprocess.run([PYTHON, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def train_the_example(test, r2sp_run, directory, env):
    """`r2sp_run` (an argv) --standalone trains fashion_mnist_cnn.py with 2 workers for 3 steps
    on tiny idx files, from `directory`: completed, in its summary.json."""
    data = os.path.join(directory, "data")
    os.makedirs(data)
    write_idx(data, "train", 64, seed=1)
    write_idx(data, "t10k", 16, seed=2)
    script = os.path.join(ROOT, "examples", "pytorch", "fashion_mnist_cnn.py")
    r = subprocess.run(r2sp_run + ["--standalone", "--nproc_per_node=2", "--log_dir=run",
                                   "--worker_flags=--heartbeat_ms=200", script,
                                   "--data_dir=" + data, "--batch_size=8", "--max_steps=3",
                                   "--threads=1"],
                       cwd=directory, capture_output=True, text=True, env=env, timeout=300)
    test.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    with open(os.path.join(directory, "run", "summary.json")) as f:
        summary = json.load(f)
    test.assertEqual((summary["completed"], summary["workers"], summary["iterations"]),
                     (True, 2, 3))


@unittest.skipIf(missing(), missing() or "")
class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="r2sp_wheel_")
        out = os.path.join(cls.tmp.name, "dist")
        r = subprocess.run([os.path.join(ROOT, "tools", "package"), "--wheel",
                            "--bin_dir=" + BIN_DIR, "--out=" + out],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        tag = python_tag()
        cls.wheel = os.path.join(out, f"r2sp-{VERSION}-{tag}-{tag}-linux_x86_64.whl")
        cls.tag = tag

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_wheel_holds_the_package_the_programs_and_a_true_record(self):
        with zipfile.ZipFile(self.wheel) as wheel:
            names = set(wheel.namelist())
            dist = f"r2sp-{VERSION}.dist-info"
            for name in ("r2sp/__init__.py", "r2sp/_core.so", "r2sp/_models.so",
                         "r2sp/_version.py", "r2sp/run/__init__.py", "r2sp/torch/__init__.py",
                         "r2sp/_launch/bin/scheduler", "r2sp/_launch/bin/server",
                         "r2sp/_launch/MANIFEST.json",
                         "r2sp/_launch/tools/pylib/job/launcher.py",
                         "r2sp/_launch/share/r2sp/deploy/python_worker", f"{dist}/RECORD"):
                self.assertIn(name, names)
            self.assertNotIn("r2sp/_launch/bin/worker", names)  # the workers are scripts
            self.assertFalse([n for n in names if "libdnnl" in n])
            self.assertEqual(wheel.getinfo("r2sp/_launch/bin/scheduler").external_attr >> 16,
                             0o100755)
            self.assertEqual(wheel.getinfo("r2sp/__init__.py").external_attr >> 16, 0o100644)
            self.assertIn(f"Tag: {self.tag}-{self.tag}-linux_x86_64",
                          wheel.read(f"{dist}/WHEEL").decode().splitlines())
            self.assertEqual(wheel.read(f"{dist}/entry_points.txt").decode(),
                             "[console_scripts]\nr2sp-run = r2sp.run:main\n")
            self.assertEqual(wheel.read("r2sp/_version.py").decode().splitlines()[-1],
                             f'VERSION = "{VERSION}"')
            record = wheel.read(f"{dist}/RECORD").decode().splitlines()
            self.assertEqual(sorted(line.split(",")[0] for line in record), sorted(names))
            for line in record:
                name, digest, size = line.split(",")
                if name.endswith("RECORD"):
                    self.assertEqual((digest, size), ("", ""))
                    continue
                data = wheel.read(name)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                self.assertEqual((digest, int(size)), ("sha256=" + want.decode(), len(data)))
            manifest = json.loads(wheel.read("r2sp/_launch/MANIFEST.json"))
            for name, digest in manifest["files"].items():  # the bundle's files, python/ aside
                data = wheel.read("r2sp/_launch/" + name)
                self.assertEqual(hashlib.sha256(data).hexdigest(), digest, name)
            self.assertIn("bin/scheduler", manifest["files"])
            extension = os.path.join(self.tmp.name, "_core.so")
            with open(extension, "wb") as f:
                f.write(wheel.read("r2sp/_core.so"))
        rpath = subprocess.run(["patchelf", "--print-rpath", extension], capture_output=True,
                               text=True, check=True).stdout.strip()
        self.assertEqual(rpath, "$ORIGIN/_launch/lib")

    def test_installed_offline_it_imports_anywhere_and_r2sp_run_trains(self):
        venv = os.path.join(self.tmp.name, "venv")
        subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", venv], check=True)
        r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "-q",
                            self.wheel], capture_output=True, text=True, env=CLEAN)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        elsewhere = os.path.join(self.tmp.name, "elsewhere")
        os.makedirs(elsewhere)
        r = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                            "import r2sp, r2sp.torch; print(r2sp.__version__, r2sp.__file__)"],
                           cwd=elsewhere, capture_output=True, text=True, env=CLEAN)
        self.assertEqual(r.returncode, 0, r.stderr)
        version, path = r.stdout.split()
        self.assertEqual(version, VERSION)
        self.assertTrue(path.startswith(venv + "/lib/"), path)
        train_the_example(self, [os.path.join(venv, "bin", "r2sp-run")], elsewhere, CLEAN)


def torch2_extension():
    """The extension tools/torch2_python built for the PyTorch 2 root's Python, or None."""
    r = subprocess.run([os.path.join(ROOT, "tools", "torch2_python"), "--check"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


@unittest.skipIf(missing() or not torch2_extension(),
                 missing() or "needs the PyTorch 2 root and its extension (tools/torch2_python "
                 "--check)")
class Torch2WheelTest(unittest.TestCase):
    def test_a_wheel_for_python_3_13_installs_and_trains_under_torch_2(self):
        """The wheel for the root's Python 3.13 (the binaries beside the extension built for
        it), installed by pip for that Python (--target: the root has no pip of its own), runs
        r2sp-run with torch 2.6."""
        tmp = tempfile.mkdtemp(prefix="r2sp_wheel313_")
        self.addCleanup(subprocess.run, ["rm", "-rf", tmp])
        bin_dir = os.path.join(tmp, "bin")
        for role in ("scheduler", "server", "worker"):
            os.makedirs(os.path.join(bin_dir, role), exist_ok=True)
            os.symlink(os.path.join(BIN_DIR, role, role), os.path.join(bin_dir, role, role))
        built = os.path.dirname(torch2_extension())
        os.makedirs(os.path.join(bin_dir, "worker", "python"))
        for name in ("_core.so", "_models.so"):
            os.symlink(os.path.join(built, name), os.path.join(bin_dir, "worker", "python", name))
        python = os.path.join(ROOT, "tools", "torch2_python")
        r = subprocess.run([os.path.join(ROOT, "tools", "package"), "--wheel", "--bin_dir=" +
                            bin_dir, "--python=" + python, "--out=" + tmp],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        wheel = os.path.join(tmp, f"r2sp-{VERSION}-cp313-cp313-linux_x86_64.whl")
        site = os.path.join(tmp, "site")
        r = subprocess.run([PYTHON, "-m", "pip", "install", "--no-index", "--no-deps", "-q",
                            "--ignore-requires-python", "--target", site, "--python-version",
                            "3.13", "--implementation", "cp", "--abi", "cp313", "--platform",
                            "linux_x86_64", "--only-binary=:all:", wheel],
                           capture_output=True, text=True, env=CLEAN)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        train_the_example(self, [ROOT_PYTHON, "-m", "r2sp.run"], tmp,
                          dict(CLEAN, PYTHONPATH=site))


if __name__ == "__main__":
    junit_main.main()

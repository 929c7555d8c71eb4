"""The release bundle on a host older than its programs: a bundle of the built binaries
(bundle.make, which carries this machine's glibc) runs in a Debian 11 root file system (glibc
2.31, older than Amazon Linux 2023's 2.34; made by tools/old_glibc_root), each binary's
--version and a 1-server, 1-worker synthetic job there, through the carried loader; natively it
cannot start there. The same job on this host natively and with R2SP_CARRIED_GLIBC=always
computes the same parameters, bit for bit. A Python worker there (run_role --worker_cmd with the
old root's python3) runs through the carried C library and loads its C extension modules (and
the r2sp extension, given one built for that Python in R2SP_OLD_PYTHON_CORE). Root only (mount and network namespaces, chroot);
skipped without the root file system (tools/old_glibc_root; tools/install_deps --test makes it).
No network: every job runs on the loopback of a network namespace of its own."""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import junit_main
from pylib.cluster import bundle as release_bundle, glibc_needs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
OLD_ROOT = os.environ.get("R2SP_OLD_GLIBC_ROOT", "/var/cache/r2sp/old_glibc_root/bullseye")
with open(os.path.join(ROOT, "VERSION")) as f:
    VERSION = f.read().strip()
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

# Run in a mount and network namespace of its own: $1 the bundle, $2 the output directory, seen
# in the old root at /mnt and /tmp; then the command ("$@" after them) there.
IN_OLD_ROOT = """set -e
root="$R2SP_TEST_ROOT" bundle="$1" out="$2"
shift 2
mount --bind "$bundle" "$root/mnt"
mount --bind "$out" "$root/tmp"
mount -t proc proc "$root/proc"
ip link set lo up
exec "$@"
"""

# A 1-server, 1-worker synthetic BSP job. $RUN prefixes each command (chroot ROOT, or nothing),
# $B is the bundle and $O the output directory as the processes see them; logs go to $LOGS.
# The worker is "$@" after those: a path in the bundle and its options (bin/worker, or run_role
# and its options before the role).
JOB = """RUN="$1" B="$2" O="$3" LOGS="$4" program="$5"
shift 5
$RUN "$B/bin/scheduler" --num_servers=1 --num_workers=1 --bind=tcp://127.0.0.1:9000 --sync=bsp \
  --register_timeout_s=30 --stats_json="$O/stats.json" >"$LOGS/scheduler.log" 2>&1 &
scheduler=$!
$RUN "$B/bin/server" --scheduler=tcp://127.0.0.1:9000 --bind='tcp://127.0.0.1:*' \
  --register_wait_s=30 >"$LOGS/server.log" 2>&1 &
server=$!
$RUN "$B/$program" "$@" --scheduler=tcp://127.0.0.1:9000 --bind='tcp://127.0.0.1:*' \
  --register_wait_s=30 --model_mb=1 --layers=2 --iterations=5 --dump_params="$O/params.bin" \
  >"$LOGS/worker.out" 2>"$LOGS/worker.log"
echo "worker $?"
wait $scheduler
echo "scheduler $?"
wait $server
echo "server $?"
"""

# A Python worker (run_role --worker_cmd) for the old root's python3: records which C library
# and Python it runs with and that their C extension modules load (and, with R2SP_TEST_CORE=1,
# the r2sp extension), then becomes the bundle's worker binary with the flags it was given.
OLD_PYTHON = r"""
import ctypes, json, os, shlex, ssl, sys, zlib
record = {"glibc": os.confstr("CS_GNU_LIBC_VERSION"), "python": "%d.%d" % sys.version_info[:2],
          "zlib": zlib.decompress(zlib.compress(b"r2sp")).decode(),
          "ctypes": ctypes.CDLL(None).getpid() == os.getpid(), "ssl": ssl.OPENSSL_VERSION.split()[0]}
if os.environ.get("R2SP_TEST_CORE") == "1":
    import r2sp._core
    record["model"] = str(r2sp._core.synthetic_model(4096, 2))
with open(os.path.join(sys.argv[1], "python.json"), "w") as f:
    json.dump(record, f)
os.execv("../bin/worker", ["../bin/worker"] + shlex.split(os.environ["R2SP_WORKER_FLAGS"]))
"""
# Optional: an r2sp extension built for the old root's Python (3.9: bazel build
# --repo_env=R2SP_PYTHON=/path/to/python3.9 //worker/python:_core.so), which the Python worker
# then imports there; this build's own is for Debian 12's Python.
OLD_PYTHON_CORE = os.environ.get("R2SP_OLD_PYTHON_CORE", "")
EXPECTED_JOB = ("worker 0: done\n",
                {"state": "finished", "iterations": 5, "pushes": 6, "pulls": 7,
                 "bytes_pushed": 6 * 1048576, "model": "synthetic"})


def read_logs(directory):
    """{name: text} of the *.log files in `directory`: what a failed job's message shows."""
    logs = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".log"):
            with open(os.path.join(directory, name)) as f:
                logs[name] = f.read()
    return logs


def usable():
    """Why the test cannot run here ('' when it can)."""
    if os.geteuid() != 0:
        return "needs root (mount namespaces, chroot)"
    if not os.path.isfile(os.path.join(OLD_ROOT, ".r2sp_root")):
        return f"no old root file system at {OLD_ROOT} (make it with tools/old_glibc_root)"
    missing = [t for t in ("unshare", "chroot", "ip") if shutil.which(t) is None]
    return f"needs {', '.join(missing)}" if missing else ""


@unittest.skipIf(usable(), usable())
class OldGlibcTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.bundle = os.path.join(cls._tmp.name, "r2sp")
        source = os.path.join(cls._tmp.name, "source")
        package = os.path.join(source, "r2sp")
        os.makedirs(package)
        for path, text in ((os.path.join(package, "__init__.py"), ""),
                           (os.path.join(source, "old_python.py"), OLD_PYTHON),
                           (os.path.join(source, "_core.so"), "stand-in")):
            with open(path, "w") as f:
                f.write(text)
        cls.manifest = release_bundle.make(
            cls.bundle, {r: os.path.join(BIN_DIR, r, r) for r in release_bundle.ROLES},
            VERSION, "cpu", "abc1234", deploy_dir=os.path.join(ROOT, "tools", "deploy"),
            python_package=(package, OLD_PYTHON_CORE or os.path.join(source, "_core.so")),
            worker_files=[os.path.join(source, "old_python.py")])

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def out_dir(self):
        out = tempfile.mkdtemp(dir=self._tmp.name)
        os.chmod(out, 0o777)
        return out

    def in_old_root(self, argv, out=None, **env):
        """Runs argv (paths as the old root sees them: the bundle at /mnt, `out` at /tmp) there."""
        namespace = ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c",
                     IN_OLD_ROOT, "sh", self.bundle, out or self.out_dir()]
        return subprocess.run(namespace + argv, capture_output=True, text=True, timeout=120,
                              env=dict(env, PATH=PATH, R2SP_TEST_ROOT=OLD_ROOT))

    def test_the_root_is_older_than_the_bundles_programs(self):
        r = self.in_old_root(["chroot", OLD_ROOT, "getconf", "GNU_LIBC_VERSION"])
        self.assertEqual((r.returncode, r.stdout), (0, "glibc 2.31\n"), r.stderr)
        self.assertEqual((self.manifest["glibc_min"], self.manifest["glibc_native"],
                          self.manifest["glibc_carried"]), ("2.31", "2.36", "2.36"))

    def test_every_binary_runs_there(self):
        for role in release_bundle.ROLES:
            with self.subTest(role=role):
                r = self.in_old_root(["chroot", OLD_ROOT, f"/mnt/bin/{role}", "--version"])
                self.assertEqual((r.returncode, r.stdout), (0, f"{role} version {VERSION} (cpu)\n"),
                                 r.stderr)

    def test_natively_it_cannot(self):
        r = self.in_old_root(["chroot", OLD_ROOT, "/mnt/bin/worker", "--version"],
                             R2SP_CARRIED_GLIBC="never")
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertIn("/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found "
                      "(required by /mnt/libexec/worker)", r.stderr)

    def test_always_loads_the_carried_library_here(self):
        carried = f"calling init: {self.bundle}/lib/glibc/libc.so.6\n"
        host = os.confstr("CS_GNU_LIBC_VERSION").split()[1]  # auto: carried where it is older
        old = glibc_needs.version_key(host) < glibc_needs.version_key(self.manifest["glibc_native"])
        for choice, loaded in (("always", True), ("never", False), ("auto", old)):
            with self.subTest(choice=choice):
                r = subprocess.run([os.path.join(self.bundle, "bin", "worker"), "--version"],
                                   capture_output=True, text=True,
                                   env={"PATH": PATH, "LD_DEBUG": "libs", "R2SP_CARRIED_GLIBC": choice})
                self.assertEqual((r.returncode, r.stdout), (0, f"worker version {VERSION} (cpu)\n"))
                self.assertEqual(carried in r.stderr.replace("\t", " "), loaded)
                self.assertNotIn(f"{self.bundle}/lib/glibc/", "" if loaded else r.stderr)

    def job(self, where, worker=("bin/worker",), **env):
        """Runs JOB in its own network namespace, in the old root or here, the worker `worker`;
        asserts that every process exited 0; returns (the worker's stdout, its stats, the final
        parameters' sha256) and leaves the output directory in self.out."""
        out = self.out = self.out_dir()
        if where == "old root":
            r = self.in_old_root(["sh", "-c", JOB, "sh", f"chroot {OLD_ROOT}", "/mnt", "/tmp", out,
                                  *worker], out=out, **env)
        else:
            r = subprocess.run(["unshare", "--net", "sh", "-c", "ip link set lo up && exec sh -c "
                                "\"$0\" sh \"$@\"", JOB, "", self.bundle, out, out, *worker],
                               capture_output=True, text=True, timeout=120, env=dict(env, PATH=PATH))
        # Every process exited 0, or the assertion shows their logs.
        self.assertEqual((r.stdout, r.stderr), ("worker 0\nscheduler 0\nserver 0\n", ""),
                         read_logs(out))
        with open(os.path.join(out, "worker.out")) as f:
            worker_out = f.read()
        with open(os.path.join(out, "stats.json")) as f:
            stats = json.load(f)["workers"][0]
        with open(os.path.join(out, "params.bin"), "rb") as f:
            params = hashlib.sha256(f.read()).hexdigest()
        fields = ("state", "iterations", "pushes", "pulls", "bytes_pushed", "model")
        return worker_out, {k: stats[k] for k in fields}, params

    def test_a_job_there_computes_what_it_does_here(self):
        expected = EXPECTED_JOB
        old = self.job("old root")
        self.assertEqual(old[:2], expected)
        native = self.job("here", R2SP_CARRIED_GLIBC="never")
        self.assertEqual(native[:2], expected)
        carried = self.job("here", R2SP_CARRIED_GLIBC="always")
        self.assertEqual(carried[:2], expected)
        self.assertEqual({old[2], carried[2]}, {native[2]})

    def test_a_python_worker_there_runs_through_the_carried_library(self):
        worker = ("share/r2sp/deploy/run_role", "--worker_cmd=python3 old_python.py /tmp",
                  "--rank=0", "--world_size=1", "--local_rank=0", "worker")
        env = {"R2SP_TEST_CORE": "1"} if OLD_PYTHON_CORE else {}
        old = self.job("old root", worker, **env)
        self.assertEqual(old[:2], EXPECTED_JOB)
        with open(os.path.join(self.out, "python.json")) as f:
            record = json.load(f)
        expected = {"glibc": "glibc 2.36", "python": "3.9", "zlib": "r2sp", "ctypes": True,
                    "ssl": "OpenSSL"}
        if OLD_PYTHON_CORE:
            expected["model"] = ("[('layer0.weight', [1322]), ('layer0.bias', [64]), "
                                 "('layer1.weight', [2646]), ('layer1.bias', [64])]")
        self.assertEqual(record, expected)
        self.assertEqual(old[2], self.job("here", R2SP_CARRIED_GLIBC="never")[2])


if __name__ == "__main__":
    junit_main.main()

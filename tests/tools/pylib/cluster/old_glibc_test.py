"""The release bundle on a host older than its programs: a bundle of the built binaries
(bundle.make, which carries this machine's glibc) runs in a Debian 11 root file system (glibc
2.31, older than the 2.34 the issue asks for; made by tools/old_glibc_root), each binary's
--version and a 1-server, 1-worker synthetic job there, through the carried loader; natively it
cannot start there. The same job on this host natively and with R2SP_CARRIED_GLIBC=always
computes the same parameters, bit for bit. Root only (mount and network namespaces, chroot);
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
JOB = """RUN="$1" B="$2" O="$3" LOGS="$4"
$RUN "$B/bin/scheduler" --num_servers=1 --num_workers=1 --bind=tcp://127.0.0.1:9000 --sync=bsp \
  --register_timeout_s=30 --stats_json="$O/stats.json" >"$LOGS/scheduler.log" 2>&1 &
scheduler=$!
$RUN "$B/bin/server" --scheduler=tcp://127.0.0.1:9000 --bind='tcp://127.0.0.1:*' \
  --register_wait_s=30 >"$LOGS/server.log" 2>&1 &
server=$!
$RUN "$B/bin/worker" --scheduler=tcp://127.0.0.1:9000 --bind='tcp://127.0.0.1:*' \
  --register_wait_s=30 --model_mb=1 --layers=2 --iterations=5 --dump_params="$O/params.bin" \
  >"$LOGS/worker.out" 2>"$LOGS/worker.log"
echo "worker $?"
wait $scheduler
echo "scheduler $?"
wait $server
echo "server $?"
"""


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
        cls.manifest = release_bundle.make(
            cls.bundle, {r: os.path.join(BIN_DIR, r, r) for r in release_bundle.ROLES},
            VERSION, "cpu", "abc1234")

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

    def job(self, where, **env):
        """Runs JOB in its own network namespace, in the old root or here; (the job's stdout,
        the worker's stdout, the worker's stats, the final parameters' sha256)."""
        out = self.out_dir()
        if where == "old root":
            r = self.in_old_root(["sh", "-c", JOB, "sh", f"chroot {OLD_ROOT}", "/mnt", "/tmp", out],
                                 out=out, **env)
        else:
            r = subprocess.run(["unshare", "--net", "sh", "-c", "ip link set lo up && exec sh -c "
                                "\"$0\" sh \"$@\"", JOB, "", self.bundle, out, out],
                               capture_output=True, text=True, timeout=120, env=dict(env, PATH=PATH))
        logs = {n: open(os.path.join(out, n)).read() for n in os.listdir(out) if n.endswith(".log")}
        self.assertEqual(r.stderr, "", logs)
        with open(os.path.join(out, "worker.out")) as f:
            worker_out = f.read()
        with open(os.path.join(out, "stats.json")) as f:
            stats = json.load(f)["workers"][0]
        with open(os.path.join(out, "params.bin"), "rb") as f:
            params = hashlib.sha256(f.read()).hexdigest()
        fields = ("state", "iterations", "pushes", "pulls", "bytes_pushed", "model")
        return r.stdout, worker_out, {k: stats[k] for k in fields}, params

    def test_a_job_there_computes_what_it_does_here(self):
        expected = ("worker 0\nscheduler 0\nserver 0\n", "worker 0: done\n",
                    {"state": "finished", "iterations": 5, "pushes": 6, "pulls": 7,
                     "bytes_pushed": 6 * 1048576, "model": "synthetic"})
        old = self.job("old root")
        self.assertEqual(old[:3], expected)
        native = self.job("here", R2SP_CARRIED_GLIBC="never")
        self.assertEqual(native[:3], expected)
        carried = self.job("here", R2SP_CARRIED_GLIBC="always")
        self.assertEqual(carried[:3], expected)
        self.assertEqual({old[3], carried[3]}, {native[3]})


if __name__ == "__main__":
    junit_main.main()

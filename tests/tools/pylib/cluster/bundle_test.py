"""tools/pylib/release_bundle.py and tools/package: a bundle of the built binaries runs wherever
it is moved, without LD_LIBRARY_PATH, loading its libraries from its own lib/ and never the C
runtime; MANIFEST.json describes it; verify() finds changed and missing files; tar() packs it
under its own name with owners and times of nobody; a missing binary is refused by name. The
Python client: the r2sp package under python/ with the extension inside as r2sp/_core.so, the
user's --worker_files under worker_files/, and tools/package refusing --worker_files without
the extension; the built extension imports from a moved bundle, its libraries from the bundle's
lib/ (skipped where it is not built). The C library: the ELF programs in libexec/ behind bin/
wrappers, this machine's glibc in lib/glibc/ (off every RPATH), MANIFEST.json's glibc fields, and
a file that needs a newer glibc than the carried one refused (old_glibc_test.py runs it on an
older base)."""

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import unittest

import junit_main
from pylib.cluster import bundle as release_bundle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
DEPLOY = os.path.join(ROOT, "tools", "deploy")
with open(os.path.join(ROOT, "VERSION")) as f:
    VERSION = f.read().strip()
RUN_ROLE = os.path.join("share", "r2sp", "deploy", "run_role")
C_RUNTIME = re.compile(r"(libc|libm)\.so\.|ld-linux")


def stand_ins(directory):
    """A bin dir of shell scripts in place of the binaries (not ELF: nothing to patch)."""
    for role in release_bundle.ROLES:
        os.makedirs(os.path.join(directory, role))
        path = os.path.join(directory, role, role)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\necho stand-in {role}\n")
        os.chmod(path, 0o755)
    return directory


def stand_in_package(directory):
    """A package directory as worker/python/r2sp/ may hold it (caches and an extension built in
    place included, which the bundle leaves out), and a stand-in _core.so; their paths."""
    package = os.path.join(directory, "r2sp")
    for rel, text in (("__init__.py", "# r2sp\n"), ("torch/__init__.py", "# r2sp.torch\n"),
                      ("__pycache__/__init__.cpython-311.pyc", "x"),
                      ("_core.cpython-311-x86_64-linux-gnu.so", "built in place")):
        os.makedirs(os.path.dirname(os.path.join(package, rel)), exist_ok=True)
        with open(os.path.join(package, rel), "w") as f:
            f.write(text)
    core = os.path.join(directory, "_core.so")
    with open(core, "w") as f:
        f.write("stand-in extension\n")
    return package, core


class BuiltBinariesTest(unittest.TestCase):
    """One bundle of the built binaries, made once and then moved away from where it was made."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        made = os.path.join(cls._tmp.name, "made", "r2sp-test-cpu")
        cls.binaries = {r: os.path.join(BIN_DIR, r, r) for r in release_bundle.ROLES}
        cls.manifest = release_bundle.make(made, cls.binaries, VERSION, "cpu", "abc1234",
                                           deploy_dir=DEPLOY,
                                           env_sh=os.path.join(DEPLOY, "env.sh"))
        cls.bundle = os.path.join(cls._tmp.name, "elsewhere", "r2sp")
        os.renames(made, cls.bundle)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_every_binary_runs_without_a_library_path(self):
        for role in release_bundle.ROLES:
            with self.subTest(role=role):
                r = subprocess.run([os.path.join(self.bundle, "bin", role), "--version"], env={},
                                   capture_output=True, text=True)
                self.assertEqual((r.returncode, r.stdout.strip()),
                                 (0, f"{role} version {VERSION} (cpu)"), r.stderr)
        r = subprocess.run([os.path.join(self.bundle, RUN_ROLE), "worker",
                            "--version"], env={}, capture_output=True, text=True)
        self.assertEqual(r.stdout.strip(), f"worker version {VERSION} (cpu)", r.stderr)

    def test_libraries_load_from_the_moved_bundle(self):
        out = subprocess.run(["ldd", os.path.join(self.bundle, "libexec", "worker")],
                             env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                             check=True).stdout
        loaded = {name: os.path.normpath(path) for name, path in
                  re.findall(r"^\s*(\S+) => (\S+) \(", out, re.MULTILINE)}
        lib = os.path.join(self.bundle, "lib")
        for name in ("libzmq.so.5", "libprotobuf"):
            found = [n for n in loaded if n.startswith(name)]
            self.assertTrue(found, out)
            self.assertEqual(os.path.dirname(loaded[found[0]]), lib, out)
        self.assertNotIn(os.path.dirname(loaded["libc.so.6"]), (lib, os.path.join(lib, "glibc")))

    def test_files_newer_than_the_carried_c_library_are_refused(self):
        library = os.path.join(self._tmp.name, "new.so")  # built on a newer system
        with open(library, "wb") as f:
            f.write(b"\x7fELF\0GLIBC_2.2.5\0GLIBC_2.99\0")
        out = os.path.join(self._tmp.name, "refused")
        with self.assertRaises(release_bundle.BundleError) as e:
            release_bundle.make(out, {"worker": self.binaries["worker"]}, VERSION, "cpu", "x",
                                worker_files=[library])
        carried = os.confstr("CS_GNU_LIBC_VERSION").split()[1]
        self.assertEqual(str(e.exception), "the bundle would not run on glibc 2.31, which "
                         "MANIFEST.json would promise: worker_files/new.so needs glibc 2.99, newer "
                         f"than the carried C library's {carried}")
        self.assertFalse(os.path.exists(os.path.join(out, "MANIFEST.json")))

    def test_the_c_runtime_is_never_on_the_rpath(self):
        libs = release_bundle.shared_libraries(self.binaries["worker"])
        self.assertIn("libzmq.so.5", libs)
        self.assertTrue(os.path.isfile(libs["libzmq.so.5"]))
        self.assertEqual([n for n in libs if C_RUNTIME.match(n)], [])
        self.assertEqual([n for n in os.listdir(os.path.join(self.bundle, "lib"))
                          if C_RUNTIME.match(n)], [])

    def test_manifest(self):
        with open(os.path.join(self.bundle, "MANIFEST.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest, self.manifest)
        self.assertEqual((manifest["version"], manifest["variant"], manifest["commit"]),
                         (VERSION, "cpu", "abc1234"))
        # This machine's glibc is carried (lib/glibc/) for older hosts, down to the tested 2.31.
        self.assertEqual((manifest["glibc_min"], manifest["glibc_carried"]),
                         ("2.31", os.confstr("CS_GNU_LIBC_VERSION").split()[1]))
        self.assertRegex(manifest["glibc_native"], r"^2\.\d+$")
        on_disk = {os.path.relpath(os.path.join(d, n), self.bundle)
                   for d, _, names in os.walk(self.bundle) for n in names} - {"MANIFEST.json"}
        self.assertEqual(set(manifest["files"]), on_disk)
        self.assertLessEqual({"bin/worker", "libexec/worker", "lib/libzmq.so.5", "env.sh",
                              "lib/glibc/libc.so.6", "lib/glibc/ld-linux-x86-64.so.2",
                              "share/r2sp/deploy/run_role"}, on_disk)
        for rel, digest in manifest["files"].items():
            with open(os.path.join(self.bundle, rel), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest, rel)
        self.assertEqual(release_bundle.verify(self.bundle), [])


CORE = os.path.join(BIN_DIR, "worker", "python", "_core.so")
# Imports r2sp._core from the bundle's python/ (argv[1]) and prints where libzmq and protobuf
# were loaded from.
IMPORT_CORE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import r2sp._core
print(r2sp._core.synthetic_model(4096, 2))
with open("/proc/self/maps") as f:
    print(json.dumps(sorted({line.split()[-1] for line in f
                             if "libzmq.so" in line or "libprotobuf.so" in line})))
"""


@unittest.skipUnless(os.path.exists(CORE), f"needs {CORE} (bazel build //worker/python:_core.so)")
class BuiltExtensionTest(unittest.TestCase):
    def test_the_extension_imports_from_the_moved_bundle(self):
        with tempfile.TemporaryDirectory() as directory:
            package = os.path.join(directory, "src", "r2sp")
            os.makedirs(package)
            with open(os.path.join(package, "__init__.py"), "w") as f:
                f.write("")
            made = os.path.join(directory, "made", "r2sp-test-cpu")
            manifest = release_bundle.make(made, {"worker": os.path.join(BIN_DIR, "worker", "worker")},
                                           VERSION, "cpu", "abc1234", python_package=(package, CORE))
            self.assertLessEqual({"python/r2sp/__init__.py", "python/r2sp/_core.so",
                                  "lib/libzmq.so.5"}, set(manifest["files"]))
            bundle = os.path.join(directory, "elsewhere", "r2sp")
            os.renames(made, bundle)
            r = subprocess.run([sys.executable, "-c", IMPORT_CORE, os.path.join(bundle, "python")],
                               env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            model, loaded = r.stdout.splitlines()
            self.assertEqual(model, "[('layer0.weight', [1322]), ('layer0.bias', [64]), "
                                    "('layer1.weight', [2646]), ('layer1.bias', [64])]")
            loaded = json.loads(loaded)
            self.assertEqual([os.path.basename(p).split(".so")[0] for p in loaded],
                             ["libprotobuf", "libzmq"])
            self.assertEqual({os.path.dirname(p) for p in loaded}, {os.path.join(bundle, "lib")})


class StandInBundleTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.bin_dir = stand_ins(os.path.join(self.dir, "bin"))
        self.bundle = os.path.join(self.dir, "r2sp-small")
        release_bundle.make(self.bundle, {r: os.path.join(self.bin_dir, r, r)
                                          for r in release_bundle.ROLES}, "1.2", "cpu", "c0ffee",
                            deploy_dir=DEPLOY, env_sh=os.path.join(DEPLOY, "env.sh"))

    def tearDown(self):
        self._tmp.cleanup()

    def test_verify_reports_changed_and_missing_files(self):
        self.assertEqual(release_bundle.verify(self.bundle), [])
        with open(os.path.join(self.bundle, "bin", "server"), "a") as f:
            f.write("#\n")
        os.remove(os.path.join(self.bundle, "env.sh"))
        self.assertEqual(sorted(release_bundle.verify(self.bundle)),
                         ["bin/server: checksum differs", "env.sh: missing"])

    def test_the_python_package_and_the_worker_files(self):
        package, core = stand_in_package(os.path.join(self.dir, "src"))
        script = os.path.join(self.dir, "train.py")
        with open(script, "w") as f:
            f.write("print('train')\n")
        os.chmod(script, 0o755)
        data = os.path.join(self.dir, "data")
        os.makedirs(os.path.join(data, "__pycache__"))
        with open(os.path.join(data, "labels.txt"), "w") as f:
            f.write("a\n")
        manifest = release_bundle.make(
            self.bundle, {"worker": os.path.join(self.bin_dir, "worker", "worker")}, "1.2", "cpu",
            "c0ffee", python_package=(package, core), worker_files=[script, data + "/"])
        self.assertEqual(sorted(manifest["files"]), [
            "bin/worker", "python/r2sp/__init__.py", "python/r2sp/_core.so",
            "python/r2sp/torch/__init__.py", "worker_files/data/labels.txt",
            "worker_files/train.py"])
        with open(os.path.join(self.bundle, "python", "r2sp", "_core.so")) as f:
            self.assertEqual(f.read(), "stand-in extension\n")
        self.assertEqual(os.stat(os.path.join(self.bundle, "worker_files", "train.py")).st_mode
                         & 0o777, 0o755)
        self.assertEqual(release_bundle.verify(self.bundle), [])

    def test_the_models_extension_built_beside_the_core_goes_with_it(self):
        package, core = stand_in_package(os.path.join(self.dir, "src"))
        with open(os.path.join(os.path.dirname(core), "_models.so"), "w") as f:
            f.write("stand-in models\n")
        manifest = release_bundle.make(
            self.bundle, {"worker": os.path.join(self.bin_dir, "worker", "worker")}, "1.2", "cpu",
            "c0ffee", python_package=(package, core))
        self.assertEqual(sorted(manifest["files"]), [
            "bin/worker", "python/r2sp/__init__.py", "python/r2sp/_core.so",
            "python/r2sp/_models.so", "python/r2sp/torch/__init__.py"])
        with open(os.path.join(self.bundle, "python", "r2sp", "_models.so")) as f:
            self.assertEqual(f.read(), "stand-in models\n")
        self.assertEqual(os.stat(os.path.join(self.bundle, "python", "r2sp", "_models.so"))
                         .st_mode & 0o777, 0o755)

    def test_worker_files_that_are_missing_or_clash(self):
        for paths, message in (
                ([os.path.join(self.dir, "no.py")], f"--worker_files: {self.dir}/no.py not found"),
                ([self.bin_dir + "/worker/worker", self.bin_dir + "/worker"],
                 f"--worker_files: {self.bin_dir}/worker/worker and {self.bin_dir}/worker would "
                 "both be worker_files/worker")):
            with self.subTest(paths=paths), self.assertRaises(release_bundle.BundleError) as e:
                release_bundle.make(os.path.join(self.dir, "b"), {}, "1", "cpu", "x",
                                    worker_files=paths)
            self.assertEqual(str(e.exception), message)

    def test_a_missing_binary_is_named(self):
        missing = os.path.join(self.dir, "nowhere", "worker")
        with self.assertRaisesRegex(release_bundle.BundleError, re.escape(missing) + " not found"):
            release_bundle.make(os.path.join(self.dir, "b"), {"worker": missing}, "1", "cpu", "x")

    def test_stand_ins_carry_no_c_library(self):
        with open(os.path.join(self.bundle, "MANIFEST.json")) as f:
            manifest = json.load(f)
        self.assertEqual((manifest["glibc_min"], manifest["glibc_native"], manifest["glibc_carried"]),
                         ("", "", ""))
        self.assertEqual(sorted(os.listdir(self.bundle)),
                         ["MANIFEST.json", "bin", "env.sh", "lib", "share"])

    def test_tar_is_under_the_bundle_name_and_owned_by_nobody_in_particular(self):
        tarball = os.path.join(self.dir, "small.tar.gz")
        if os.geteuid() == 0:  # files of another owner than the packer, too
            os.chown(os.path.join(self.bundle, "env.sh"), 1234, 1234)
        release_bundle.tar(self.bundle + "/", tarball)
        self.assertEqual(os.listdir(self.dir).count("small.tar.gz.tmp"), 0)
        with tarfile.open(tarball) as t:
            members = t.getmembers()
        names = {m.name for m in members}
        self.assertIn("r2sp-small/MANIFEST.json", names)
        self.assertIn("r2sp-small/share/r2sp/deploy/run_role", names)
        self.assertEqual({n for n in names if n.split("/")[0] != "r2sp-small"}, set())
        self.assertEqual({(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members},
                         {(0, 0, "root", "root", 0)})


class InstalledTest(unittest.TestCase):
    """What the backends decide on before unpacking a bundle again: the same manifest (as JSON,
    whatever its layout) and every file intact (check_files, verify)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="installed_test.")
        self.addCleanup(__import__("shutil").rmtree, self.dir)
        os.makedirs(os.path.join(self.dir, "bin"))
        with open(os.path.join(self.dir, "bin", "worker"), "wb") as f:
            f.write(b"worker")
        self.manifest = {"version": "1.0", "files": {"bin/worker": hashlib.sha256(b"worker").hexdigest()}}
        self.text = json.dumps(self.manifest, indent=1, sort_keys=True) + "\n"
        with open(os.path.join(self.dir, "MANIFEST.json"), "w") as f:
            f.write(self.text)

    def test_check_files(self):
        digest = self.manifest["files"]["bin/worker"]
        self.assertEqual(release_bundle.check_files(self.manifest, {"bin/worker": digest}), [])
        self.assertEqual(release_bundle.check_files(self.manifest, {}), ["bin/worker: missing"])
        self.assertEqual(release_bundle.check_files(self.manifest, {"bin/worker": "0" * 64}),
                         ["bin/worker: checksum differs"])

    def test_the_same_intact_bundle_is_installed(self):
        self.assertTrue(release_bundle.installed(self.dir, json.dumps(self.manifest)))
        self.assertTrue(release_bundle.same_manifest(self.text, json.dumps(self.manifest)))
        self.assertFalse(release_bundle.same_manifest("not json", json.dumps(self.manifest)))

    def test_another_bundle_or_a_damaged_one_is_not(self):
        other = dict(self.manifest, version="1.1")
        self.assertFalse(release_bundle.installed(self.dir, json.dumps(other)))
        with open(os.path.join(self.dir, "bin", "worker"), "ab") as f:
            f.write(b"!")
        self.assertEqual(release_bundle.verify(self.dir), ["bin/worker: checksum differs"])
        self.assertFalse(release_bundle.installed(self.dir, self.text))
        self.assertFalse(release_bundle.installed(os.path.join(self.dir, "none"), self.text))


class PackageScriptTest(unittest.TestCase):
    def package(self, bin_dir, out):
        return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "package"),
                               "--bin_dir=" + bin_dir, "--out=" + out],
                              capture_output=True, text=True)

    def test_prints_the_tarball(self):
        with tempfile.TemporaryDirectory() as directory:
            out = os.path.join(directory, "out")
            r = self.package(stand_ins(os.path.join(directory, "bin")), out)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            tarball = os.path.join(out, f"r2sp-{VERSION}-cpu.tar.gz")
            self.assertTrue(r.stdout.startswith(f"package: {tarball} ("), r.stdout)
            self.assertTrue(tarfile.is_tarfile(tarball))

    def test_the_python_package_and_worker_files(self):
        with tempfile.TemporaryDirectory() as directory:
            bin_dir = stand_ins(os.path.join(directory, "bin"))
            package, core = stand_in_package(directory)
            os.makedirs(os.path.join(bin_dir, "worker", "python"))
            os.rename(core, os.path.join(bin_dir, "worker", "python", "_core.so"))
            script = os.path.join(directory, "train.py")
            with open(script, "w") as f:
                f.write("print('train')\n")
            out = os.path.join(directory, "out")
            r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "package"),
                                "--bin_dir=" + bin_dir, "--out=" + out, "--package_dir=" + package,
                                "--worker_files=" + script], capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            self.assertNotIn("no Python package", r.stdout)
            with tarfile.open(os.path.join(out, f"r2sp-{VERSION}-cpu.tar.gz")) as t:
                names = {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile()}
            self.assertLessEqual({"python/r2sp/__init__.py", "python/r2sp/torch/__init__.py",
                                  "python/r2sp/_core.so", "worker_files/train.py",
                                  "share/r2sp/deploy/python_worker", "bin/worker"}, names)

    def test_without_the_extension(self):
        with tempfile.TemporaryDirectory() as directory:
            bin_dir = stand_ins(os.path.join(directory, "bin"))
            r = self.package(bin_dir, os.path.join(directory, "out"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.endswith(f"; no Python package: {bin_dir}/worker/python/"
                                              "_core.so missing)\n"), r.stdout)
            r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "package"),
                                "--bin_dir=" + bin_dir, "--out=" + os.path.join(directory, "out"),
                                "--worker_files=" + bin_dir], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stderr, "package: error: --worker_files are for Python workers, "
                             f"but {bin_dir}/worker/python/_core.so is missing (build "
                             "//worker/python:_core.so)\n")

    def test_missing_binaries_exit_1(self):
        with tempfile.TemporaryDirectory() as directory:
            r = self.package(directory, os.path.join(directory, "out"))
            self.assertEqual(r.returncode, 1)
            self.assertTrue(r.stderr.startswith("package: error: "), r.stderr)
            self.assertIn(os.path.join(directory, "scheduler", "scheduler") + " not found",
                          r.stderr)


if __name__ == "__main__":
    junit_main.main()

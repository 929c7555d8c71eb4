"""r2sp._loader: where the package finds its C++ extension (inside the package, $R2SP_CORE,
the build tree), the ImportErrors that say what to build, and the package's errors."""

import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import r2sp_testing

r2sp_testing.setup_path()
import junit_main  # noqa: E402

import r2sp  # noqa: E402
from r2sp import _loader  # noqa: E402

HINT = ("build it with `bazel build //worker/python:_core.so` (from the repository root), or "
        "set R2SP_CORE to the path of a _core.so")


def touch(*parts):
    path = os.path.join(*parts)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("not an extension\n")
    return path


class FindCoreTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp(prefix="r2sp_loader_")
        self.package = os.path.join(self.repo, "worker", "python", "r2sp")
        os.makedirs(self.package)
        self.built = os.path.join(self.repo, "bazel-bin", "worker", "python", "_core.so")

    def test_inside_the_package_first(self):
        inside = touch(self.package, "_core.cpython-311-x86_64-linux-gnu.so")
        other = touch(self.repo, "other.so")
        touch(self.built)
        self.assertEqual(_loader.find_core(self.package, {"R2SP_CORE": other}), inside)

    def test_then_r2sp_core_then_the_build_tree(self):
        other = touch(self.repo, "other.so")
        touch(self.built)
        self.assertEqual(_loader.find_core(self.package, {"R2SP_CORE": other}), other)
        self.assertEqual(_loader.find_core(self.package, {}), self.built)

    def test_r2sp_core_naming_no_file(self):
        touch(self.built)
        missing = os.path.join(self.repo, "missing.so")
        with self.assertRaises(ImportError) as e:
            _loader.find_core(self.package, {"R2SP_CORE": missing})
        self.assertEqual(str(e.exception), f"r2sp: R2SP_CORE={missing} is not a file; {HINT}")

    def test_nowhere(self):
        with self.assertRaises(ImportError) as e:
            _loader.find_core(self.package, {})
        self.assertEqual(str(e.exception), "r2sp: cannot find the C++ extension _core.so "
                                           f"(looked for {self.built}); {HINT}")

    def test_a_file_that_is_not_an_extension(self):
        bad = touch(self.built)
        with self.assertRaises(ImportError) as e:
            _loader.load_core("r2sp_loader_test_pkg", self.package, {})
        self.assertTrue(str(e.exception).startswith(f"r2sp: cannot load the C++ extension {bad}: "),
                        str(e.exception))
        self.assertTrue(str(e.exception).endswith(
            f"(was it built for this Python, {sys.version.split()[0]}? {HINT}; for this "
            f"interpreter: `bazel build --repo_env=R2SP_PYTHON={sys.executable} "
            "//worker/python:_core.so`)"), str(e.exception))
        self.assertNotIn("r2sp_loader_test_pkg._core", sys.modules)


class LoadTest(unittest.TestCase):
    def test_an_extension_for_a_newer_glibc_says_so(self):
        error = ("/x/_core.so: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.99' not found "
                 "(required by /x/_core.so)")
        with mock.patch("importlib.machinery.ExtensionFileLoader.create_module",
                        side_effect=ImportError(error)), self.assertRaises(ImportError) as e:
            _loader._load("r2sp_loader_test_glibc._core", "/x/_core.so")
        self.assertEqual(str(e.exception), f"r2sp: cannot load the C++ extension /x/_core.so: "
                         f"{error} (it was built on a system whose C library is newer than this "
                         f"host's glibc {os.confstr('CS_GNU_LIBC_VERSION').split()[-1]}: build "
                         "it, or the wheel, on a system at least as old as this one)")


class PackageTest(unittest.TestCase):
    def test_the_package_reexports_the_extensions_errors(self):
        self.assertIs(r2sp.R2SPError, r2sp._core.R2SPError)
        self.assertIs(r2sp.JobLost, r2sp._core.JobLost)
        self.assertTrue(issubclass(r2sp.JobLost, r2sp.R2SPError))
        self.assertTrue(issubclass(r2sp.R2SPError, RuntimeError))
        self.assertIs(sys.modules["r2sp._core"], r2sp._core)

    def test_the_extension_loads_when_first_used_so_the_launcher_needs_none(self):
        check = ("import sys, r2sp, r2sp.run\n"
                 "print(r2sp.__version__, 'r2sp._core' in sys.modules)\n"
                 "try:\n    r2sp.R2SPError\nexcept ImportError as e:\n    print(e)\n")
        missing = os.path.join(tempfile.gettempdir(), "no_such_core.so")
        r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                           env=dict(os.environ, R2SP_CORE=missing, PYTHONPATH=os.path.join(
                               r2sp_testing.ROOT, "worker", "python")))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(r2sp_testing.ROOT, "VERSION")) as f:
            version = f.read().strip()
        self.assertEqual(r.stdout, f"{version} False\nr2sp: R2SP_CORE={missing} is not a file; "
                                   f"{HINT}\n")
        with self.assertRaises(AttributeError):
            r2sp.no_such_name  # noqa: B018


if __name__ == "__main__":
    junit_main.main()

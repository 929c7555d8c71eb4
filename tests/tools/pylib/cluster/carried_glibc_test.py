"""tools/pylib/cluster/carried_glibc.py: the bin/ wrappers choose the native program or the
carried loader by the host's glibc (a stand-in getconf), R2SP_CARRIED_GLIBC overrides them, they
work through symlinks and from any directory and keep LD_LIBRARY_PATH's directories after the
bundle's; carry() copies glibc's libraries and nothing else; check_floor() finds files that break
the promise. Stand-ins throughout: the real bundle runs in old_glibc_test.py."""

import os
import subprocess
import tempfile
import unittest

import junit_main
from pylib.cluster import carried_glibc


def write(path, text, mode=0o755):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


class WrapperTest(unittest.TestCase):
    """A bundle whose libexec/worker and carried loader are scripts that print how they ran."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.bundle = os.path.join(self.dir, "r2sp")
        write(os.path.join(self.bundle, "libexec", "worker"), '#!/bin/sh\necho "native $*"\n')
        write(os.path.join(self.bundle, "lib", "glibc", carried_glibc.LOADER),
              '#!/bin/sh\necho "carried $*"\n')
        carried_glibc.write_wrapper(os.path.join(self.bundle, "bin"), "worker", "2.36")
        self.fake = os.path.join(self.dir, "fake")  # a getconf that prints $HOST_GLIBC
        write(os.path.join(self.fake, "getconf"),
              '#!/bin/sh\n[ "$1" = GNU_LIBC_VERSION ] && [ -n "$HOST_GLIBC" ] && '
              'echo "glibc $HOST_GLIBC"\n')

    def run_worker(self, host, path=None, cwd=None, **env):
        variables = {"PATH": f"{self.fake}:/usr/bin:/bin", "HOST_GLIBC": host}
        variables.update(env)
        return subprocess.run([path or os.path.join(self.bundle, "bin", "worker"), "--x", "a b"],
                              env=variables, cwd=cwd, capture_output=True, text=True)

    def carried(self, library_path=""):
        lib = os.path.join(self.bundle, "lib")
        program = os.path.join(self.bundle, "libexec", "worker")
        return (f"carried --library-path {lib}/glibc:{lib}{library_path}:/lib64:/usr/lib64 "
                f"--argv0 {program} "
                f"{program} --x a b\n")

    def test_the_host_version_chooses(self):
        for host, native in (("2.36", True), ("2.39", True), ("3.0", True), ("2.35", False),
                             ("2.31", False), ("1.99", False), ("", False), ("musl", False)):
            with self.subTest(host=host):
                r = self.run_worker(host)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertEqual(r.stdout, "native --x a b\n" if native else self.carried())

    def test_the_override(self):
        self.assertEqual(self.run_worker("2.40", R2SP_CARRIED_GLIBC="always").stdout,
                         self.carried())
        self.assertEqual(self.run_worker("2.17", R2SP_CARRIED_GLIBC="never").stdout,
                         "native --x a b\n")
        self.assertEqual(self.run_worker("2.17", R2SP_CARRIED_GLIBC="auto").stdout,
                         self.carried())
        r = self.run_worker("2.40", R2SP_CARRIED_GLIBC="yes")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (
            2, "", "worker: R2SP_CARRIED_GLIBC must be auto, always or never, not 'yes'\n"))

    def test_library_path_follows_the_bundle(self):
        r = self.run_worker("2.31", LD_LIBRARY_PATH="/usr/local/cuda/lib64:/x")
        self.assertEqual(r.stdout, self.carried(":/usr/local/cuda/lib64:/x"))

    def test_through_a_symlink_from_elsewhere(self):
        link = os.path.join(self.dir, "bins", "worker", "worker")  # gpu_checks' link_bins
        os.makedirs(os.path.dirname(link))
        os.symlink(os.path.join(self.bundle, "bin", "worker"), link)
        self.assertEqual(self.run_worker("2.31", path=link, cwd="/").stdout, self.carried())
        self.assertEqual(self.run_worker("2.36", path=link, cwd="/").stdout, "native --x a b\n")

    def test_the_wrapper_names_its_need(self):
        text = carried_glibc.wrapper("server", "2.40")
        self.assertIn('program="$bundle/libexec/server"', text)
        self.assertIn('if [ "$major" -gt 2 ] || { [ "$major" -eq 2 ] && [ "${minor:-0}" -ge 40 ]; }',
                      text)


class CarryTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.source = os.path.join(self.dir, "lib")
        for name in ("ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libpthread.so.0",
                     "libgcc_s.so.1", "libnss_files.so.2", "libzmq.so.5", "libc.so",
                     "libstdc++.so.6", "libnsl.so.1"):
            write(os.path.join(self.source, name),
                  "\0GLIBC_2.2.5\0GLIBC_2.36\0GLIBC_PRIVATE\0" if name == "libc.so.6" else "x")

    def test_carries_glibc_and_libgcc_s_only(self):
        target = os.path.join(self.dir, "bundle", "lib", "glibc")
        self.assertEqual(carried_glibc.carry(target, self.source), "2.36")
        self.assertEqual(sorted(os.listdir(target)), [
            "ld-linux-x86-64.so.2", "libc.so.6", "libgcc_s.so.1", "libm.so.6",
            "libnss_files.so.2", "libpthread.so.0"])
        self.assertEqual(os.stat(os.path.join(target, "libc.so.6")).st_mode & 0o777, 0o755)

    def test_a_missing_loader_is_named(self):
        os.remove(os.path.join(self.source, "ld-linux-x86-64.so.2"))
        with self.assertRaises(ValueError) as e:
            carried_glibc.carry(os.path.join(self.dir, "t"), self.source)
        self.assertEqual(str(e.exception),
                         f"{self.source} has no ld-linux-x86-64.so.2: cannot carry its glibc")

    def test_the_c_library_dir(self):
        self.assertEqual(carried_glibc.c_library_dir(
            {"libzmq.so.5": "/x/libzmq.so.5", "libc.so.6": os.path.join(self.source, "libc.so.6")}),
            self.source)
        with self.assertRaisesRegex(ValueError, "load no libc.so.6"):
            carried_glibc.c_library_dir({"libzmq.so.5": "/x/libzmq.so.5"})


class CheckFloorTest(unittest.TestCase):
    """A bundle of fabricated ELF files (the ELF magic, then the version strings)."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.bundle = tmp.name
        for rel, versions in (("libexec/worker", "2.34"), ("lib/libstdc++.so.6", "2.36"),
                              ("lib/glibc/libc.so.6", "2.36"), ("python/r2sp/_core.so", "2.34")):
            write(os.path.join(self.bundle, rel), f"\x7fELF\0GLIBC_2.2.5\0GLIBC_{versions}\0")
        write(os.path.join(self.bundle, "bin", "worker"), "#!/bin/sh\n")

    def test_within_the_carried_library(self):
        self.assertEqual(carried_glibc.check_floor(self.bundle, "2.31", "2.36"), [])

    def test_a_file_newer_than_the_carried_library(self):
        write(os.path.join(self.bundle, "lib", "libnew.so"), "\x7fELF\0GLIBC_2.38\0")
        self.assertEqual(carried_glibc.check_floor(self.bundle, "2.31", "2.36"),
                         ["lib/libnew.so needs glibc 2.38, newer than the carried C library's 2.36"])

    def test_an_elf_program_in_bin(self):
        write(os.path.join(self.bundle, "bin", "worker"), "\x7fELF\0GLIBC_2.34\0")
        self.assertEqual(carried_glibc.check_floor(self.bundle, "2.31", "2.36"), [
            "bin/worker is an ELF program in bin/: a host older than glibc 2.34 cannot start it "
            "(it belongs in libexec/, behind a wrapper)"])

    def test_nothing_carried(self):
        self.assertEqual(carried_glibc.check_floor(self.bundle, "2.36", ""), [])
        self.assertEqual(carried_glibc.check_floor(self.bundle, "2.34", ""), [
            "lib/libstdc++.so.6 needs glibc 2.36, newer than the promised 2.34"])


if __name__ == "__main__":
    junit_main.main()

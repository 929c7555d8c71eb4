"""tools/pylib/cluster/glibc_needs.py: versions compare as numbers, a file's need is the newest
GLIBC_x.y it names, needs() finds every ELF file of a tree except a skipped directory."""

import os
import tempfile
import unittest

import junit_main
from pylib.cluster import glibc_needs


class GlibcNeedsTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def write(self, rel, data):
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_version_key(self):
        self.assertEqual(glibc_needs.version_key("2.31"), (2, 31))
        self.assertEqual(glibc_needs.version_key("2.4.1"), (2, 4))
        self.assertLess(glibc_needs.version_key("2.4"), glibc_needs.version_key("2.17"))
        for bad in ("", "2", "glibc 2.31", "2.x"):
            with self.subTest(bad=bad), self.assertRaises(ValueError) as e:
                glibc_needs.version_key(bad)
            self.assertEqual(str(e.exception), f"not a glibc version: {bad!r} (expected e.g. 2.31)")

    def test_newest(self):
        a = self.write("a", b"\0GLIBC_2.3\0GLIBC_2.34\0GLIBC_PRIVATE\0")
        b = self.write("b", b"x GLIBC_2.4 GLIBC_2.17\0")
        empty = self.write("empty", b"")
        self.assertEqual(glibc_needs.newest([a, b]), "2.34")
        self.assertEqual(glibc_needs.newest([b]), "2.17")
        self.assertEqual(glibc_needs.newest([empty]), "")

    def test_needs_of_the_elf_files(self):
        self.write("bin/worker", b"#!/bin/sh\n# GLIBC_2.99\n")  # a script: not counted
        self.write("libexec/worker", b"\x7fELF\0GLIBC_2.34\0")
        self.write("lib/libx.so", b"\x7fELF\0")
        self.write("lib/glibc/libc.so.6", b"\x7fELF\0GLIBC_2.36\0")
        os.symlink("libx.so", os.path.join(self.dir, "lib", "liby.so"))
        self.assertEqual(glibc_needs.needs(self.dir, skip=os.path.join("lib", "glibc")),
                         {"libexec/worker": "2.34", "lib/libx.so": ""})
        self.assertEqual(glibc_needs.needs(self.dir)["lib/glibc/libc.so.6"], "2.36")
        self.assertTrue(glibc_needs.is_elf(os.path.join(self.dir, "lib", "libx.so")))
        self.assertFalse(glibc_needs.is_elf(os.path.join(self.dir, "bin", "worker")))


if __name__ == "__main__":
    junit_main.main()

"""tools/pylib/deploy/archive.py: safe_extract unpacks a plain archive (files, directories, links
inside it, modes kept) and refuses crafted ones (an absolute path, '..', a symbolic or hard link
pointing outside, a device, a FIFO) with a message naming the member, writing nothing outside the
target and, for a file archive, nothing at all; a stream is checked member by member. Also the
shared shell quoting (deploy/shell.py)."""

import io
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
import unittest

import junit_main
from pylib.deploy import archive, shell


def crafted(path, members):
    """Writes the tar.gz `path` from [(name, kind, extra)]: kind file (extra: bytes), dir,
    symlink or hardlink (extra: link name), chr or fifo."""
    kinds = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
             "hardlink": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}
    with tarfile.open(path, "w:gz") as t:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            info.type = kinds[kind]
            info.mode = 0o644 if kind in ("chr", "fifo") else 0o755  # a hard link shares its file's
            data = None
            if kind == "file":
                info.size, data = len(extra), io.BytesIO(extra)
            elif kind in ("symlink", "hardlink"):
                info.linkname = extra
            t.addfile(info, data)


class SafeExtractTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="archive_test.")
        self.addCleanup(shutil.rmtree, self.dir)
        self.target = os.path.join(self.dir, "target")
        self.tarball = os.path.join(self.dir, "bundle.tar.gz")

    def extract(self, members):
        crafted(self.tarball, members)
        with tarfile.open(self.tarball) as t:
            return archive.safe_extract(t, self.target)

    def test_a_plain_archive_is_unpacked(self):
        names = self.extract([("b", "dir", None), ("b/bin", "dir", None),
                              ("b/bin/worker", "file", b"#!/bin/sh\n"),
                              ("b/lib.so", "symlink", "bin/worker"),
                              ("b/again", "hardlink", "b/bin/worker")])
        self.assertEqual(names, ["b", "b/bin", "b/bin/worker", "b/lib.so", "b/again"])
        worker = os.path.join(self.target, "b", "bin", "worker")
        with open(worker, "rb") as f:
            self.assertEqual(f.read(), b"#!/bin/sh\n")
        self.assertEqual(stat.S_IMODE(os.stat(worker).st_mode), 0o755)
        self.assertEqual(os.readlink(os.path.join(self.target, "b", "lib.so")), "bin/worker")
        self.assertEqual(os.stat(os.path.join(self.target, "b", "again")).st_ino, os.stat(worker).st_ino)

    def test_crafted_archives_are_refused_and_write_nothing(self):
        cases = [
            ("/etc/r2sp-owned", "file", b"x", "'/etc/r2sp-owned': an absolute path"),
            ("../escape", "file", b"x", "'../escape': a path with '..'"),
            ("b/../../escape", "file", b"x", "'b/../../escape': a path with '..'"),
            ("b/in/../ok", "file", b"x", "'b/in/../ok': a path with '..'"),
            ("b/link", "symlink", "/etc/passwd", "'b/link': a link to the absolute path '/etc/passwd'"),
            ("b/link", "symlink", "../../outside", "'b/link': a link to '../../outside', outside the target"),
            ("b/hard", "hardlink", "../outside", "'b/hard': a link to '../outside', outside the target"),
            ("b/tty", "chr", None, "'b/tty': not a file, directory or link (a device or FIFO)"),
            ("b/pipe", "fifo", None, "'b/pipe': not a file, directory or link (a device or FIFO)"),
        ]
        for name, kind, extra, message in cases:
            with self.subTest(name=name, kind=kind):
                shutil.rmtree(self.target, ignore_errors=True)
                with self.assertRaises(archive.UnsafeArchive) as e:
                    # A harmless member first: a file archive is checked whole before any write.
                    self.extract([("b", "dir", None), ("b/first", "file", b"1"), (name, kind, extra)])
                self.assertEqual(str(e.exception), message)
                self.assertEqual(sorted(os.listdir(self.dir)), ["bundle.tar.gz"])

    def test_a_stream_is_checked_member_by_member(self):
        crafted(self.tarball, [("first", "file", b"1"), ("../escape", "file", b"x")])
        with open(self.tarball, "rb") as raw, tarfile.open(fileobj=raw, mode="r|gz") as stream, \
                self.assertRaisesRegex(archive.UnsafeArchive, r"^'\.\./escape': a path with '\.\.'$"):
            archive.safe_extract(stream, self.target, stream=True)
        self.assertEqual(os.listdir(self.target), ["first"])  # written before the bad member
        self.assertFalse(os.path.exists(os.path.join(self.dir, "escape")))

    def test_check_tarball_before_shipping(self):
        crafted(self.tarball, [("b", "dir", None), ("b/bin", "file", b"x")])
        archive.check_tarball(self.tarball)
        crafted(self.tarball, [("b", "dir", None), ("b/lib", "symlink", "/usr/lib")])
        with self.assertRaisesRegex(archive.UnsafeArchive,
                                    r"^'b/lib': a link to the absolute path '/usr/lib'$"):
            archive.check_tarball(self.tarball)

    def test_a_link_inside_then_a_path_through_it_is_refused(self):
        # b/up -> .. stays inside; b/up/../x would climb out through it, and is refused by name.
        with self.assertRaisesRegex(archive.UnsafeArchive, r"^'b/up/\.\./x': a path with '\.\.'$"):
            self.extract([("b", "dir", None), ("b/up", "symlink", ".."), ("b/up/../x", "file", b"x")])


class ShellWordTest(unittest.TestCase):
    def bash(self, word, **env):
        return subprocess.run(["bash", "-c", "printf '%s|' " + word], capture_output=True,
                              text=True, env=env, check=True).stdout

    def test_literal_words(self):
        for arg in ("plain", "it's", 'a"$b`c', "two words", "$(rm -rf /)", ""):
            with self.subTest(arg=arg):
                self.assertEqual(self.bash(shell.shell_word(arg)), arg + "|")

    def test_live_variables_expand_as_one_word(self):
        live = shell.variables("R2SP_OUT")
        word = shell.shell_word("--metrics=$R2SP_OUT/m $x.jsonl", live)
        self.assertEqual(word, "--metrics=\"$R2SP_OUT\"'/m $x.jsonl'")
        self.assertEqual(self.bash(word, R2SP_OUT="/a b"), "--metrics=/a b/m $x.jsonl|")
        # A longer name is not the live one.
        self.assertEqual(shell.shell_word("$R2SP_OUTPUT", live), "'$R2SP_OUTPUT'")

    def test_a_custom_expansion(self):
        word = shell.shell_word("--x=@OUT@/y", re.compile("@OUT@"), lambda m: '"$out"')
        self.assertEqual(word, '--x="$out"/y')


if __name__ == "__main__":
    junit_main.main()

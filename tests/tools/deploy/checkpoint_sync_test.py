"""tools/deploy/checkpoint_sync, which copies a server host's checkpoints to the job's
checkpoint_url and back: whole, verified checkpoints only (a copy that does not match its
MANIFEST is removed and said), incomplete ones (no MANIFEST yet) left alone, the newest 3 per
server kept at the URL, nothing copied twice, and a URL other than file:/// refused."""

import os
import subprocess
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SYNC = os.path.join(ROOT, "tools", "deploy", "checkpoint_sync")


def checkpoint(directory, server, sequence, data=b"shard", listed=None):
    """DIR/server<S>/ckpt-<N>/ with shard.bin and a MANIFEST listing it (`listed` bytes)."""
    path = os.path.join(directory, f"server{server}", f"ckpt-{sequence:08d}")
    os.makedirs(path)
    with open(os.path.join(path, "shard.bin"), "wb") as f:
        f.write(data)
    with open(os.path.join(path, "MANIFEST"), "w") as f:
        f.write(f'step: {sequence}\nfiles {{\n  name: "shard.bin"\n  bytes: '
                f'{len(data) if listed is None else listed}\n  crc32c: 1\n}}\n')
    return path


class CheckpointSyncTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.local = os.path.join(self._tmp.name, "local")
        self.url_dir = os.path.join(self._tmp.name, "url")
        self.url = "file://" + self.url_dir

    def sync(self, mode, directory=None):
        return subprocess.run([SYNC, mode, directory or self.local, self.url],
                              capture_output=True, text=True, timeout=30)

    def listing(self, directory):
        return sorted(os.path.relpath(os.path.join(d, f), directory)
                      for d, _, files in os.walk(directory) for f in files)

    def test_up_then_down_on_another_host(self):
        checkpoint(self.local, 0, 1, b"a" * 100)
        checkpoint(self.local, 1, 1, b"b" * 50)
        os.makedirs(os.path.join(self.local, "server1", ".tmp-2-99"))  # being written
        r = self.sync("up")
        self.assertEqual(r.returncode, 0, r.stderr)
        expected = ["server0/ckpt-00000001/MANIFEST", "server0/ckpt-00000001/shard.bin",
                    "server1/ckpt-00000001/MANIFEST", "server1/ckpt-00000001/shard.bin"]
        self.assertEqual(self.listing(self.url_dir), expected)
        self.assertEqual(sorted(os.listdir(os.path.join(self.url_dir, "server1"))), ["ckpt-00000001"])
        self.assertEqual(self.sync("up").stdout, "")  # nothing twice
        other = os.path.join(self._tmp.name, "other")
        r = self.sync("down", other)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.listing(other), expected)
        with open(os.path.join(other, "server0", "ckpt-00000001", "shard.bin"), "rb") as f:
            self.assertEqual(f.read(), b"a" * 100)

    def test_a_copy_that_does_not_match_its_manifest_is_left_out(self):
        checkpoint(self.local, 0, 1, b"abc", listed=9)  # the manifest wants 9 bytes
        r = self.sync("up")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stderr, f"checkpoint_sync: copying {self.local}/server0/ckpt-00000001 "
                                   f"to {self.url_dir}/server0/ failed; left out\n")
        self.assertEqual(os.listdir(os.path.join(self.url_dir, "server0")), [])

    def test_the_newest_three_are_kept(self):
        for sequence in range(1, 6):
            checkpoint(self.local, 0, sequence)
        self.assertEqual(self.sync("up").returncode, 0)
        self.assertEqual(sorted(os.listdir(os.path.join(self.url_dir, "server0"))),
                         ["ckpt-00000003", "ckpt-00000004", "ckpt-00000005"])

    def test_bad_arguments(self):
        r = subprocess.run([SYNC, "up", self.local, "s3://bucket/c"], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr), (2, "checkpoint_sync: error: s3://bucket/c: "
                                                       "only file:///PATH URLs are supported\n"))
        r = subprocess.run([SYNC, "sideways", self.local, self.url], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    junit_main.main()

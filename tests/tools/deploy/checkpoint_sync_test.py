"""tools/deploy/checkpoint_sync, which copies a server host's checkpoints to the job's
checkpoint_url and back: whole, verified checkpoints only (a copy that does not match its
MANIFEST is removed and said), incomplete ones (no MANIFEST yet) left alone, the newest 3 per
server kept at the URL, nothing copied twice, and a URL other than file:/// or s3:// refused.
s3:// through the `aws` stand-in (fake_aws, a directory as the bucket): the MANIFEST goes up
last, after the sizes are listed back; a checkpoint without its MANIFEST at the URL does not
count; down restores into another directory; watch lists the URL once."""

import os
import subprocess
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SYNC = os.path.join(ROOT, "tools", "deploy", "checkpoint_sync")
FAKE_AWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_aws")


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

    def test_a_copy_abandoned_at_the_url_goes_after_an_hour_one_under_way_stays(self):
        checkpoint(self.local, 0, 1)
        abandoned = checkpoint(self.url_dir, 0, 7).replace("ckpt-", ".tmp-ckpt-")
        os.rename(abandoned.replace(".tmp-ckpt-", "ckpt-"), abandoned)
        for d, _, files in os.walk(abandoned):  # its copier killed 61 minutes ago
            for path in [d] + [os.path.join(d, f) for f in files]:
                os.utime(path, (os.path.getmtime(path) - 61 * 60,) * 2)
        under_way = checkpoint(self.url_dir, 0, 8).replace("ckpt-", ".tmp-ckpt-")
        os.rename(under_way.replace(".tmp-ckpt-", "ckpt-"), under_way)
        os.utime(under_way, (os.path.getmtime(under_way) - 61 * 60,) * 2)  # its file still new
        self.assertEqual(self.sync("up").returncode, 0)
        self.assertEqual(sorted(os.listdir(os.path.join(self.url_dir, "server0"))),
                         [".tmp-ckpt-00000008", "ckpt-00000001"])

    def test_bad_arguments(self):
        r = subprocess.run([SYNC, "up", self.local, "s3://bucket"], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr), (2, "checkpoint_sync: error: s3://bucket: only "
                                                       "file:///PATH and s3://BUCKET/PREFIX URLs "
                                                       "are supported\n"))
        r = subprocess.run([SYNC, "sideways", self.local, self.url], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)


class CheckpointSyncS3Test(unittest.TestCase):
    URL = "s3://bucket/ckpt/job-run1"

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.local = os.path.join(self._tmp.name, "local")
        self.s3 = os.path.join(self._tmp.name, "s3")
        self.there = os.path.join(self.s3, "bucket", "ckpt", "job-run1")
        os.makedirs(self.s3)
        bin_dir = os.path.join(self._tmp.name, "bin")
        os.makedirs(bin_dir)
        os.symlink(FAKE_AWS, os.path.join(bin_dir, "aws"))
        self.env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], S3_ROOT=self.s3)

    def sync(self, *argv):
        return subprocess.run([SYNC, *argv], capture_output=True, text=True, timeout=60,
                              env=self.env)

    def calls(self):
        with open(os.path.join(self.s3, "calls")) as f:
            return f.read().splitlines()

    def listing(self, directory):
        return sorted(os.path.relpath(os.path.join(d, f), directory)
                      for d, _, files in os.walk(directory) for f in files)

    def test_up_puts_the_manifest_last_and_down_restores_elsewhere(self):
        checkpoint(self.local, 0, 1, b"a" * 100)
        checkpoint(self.local, 1, 2, b"b" * 50)
        r = self.sync("up", self.local, self.URL)
        self.assertEqual(r.returncode, 0, r.stderr)
        ckpt = f"{self.URL}/server0/ckpt-00000001"
        self.assertEqual(self.calls()[:4], [
            f"s3 ls --recursive {self.URL}/",
            f"s3 cp --only-show-errors {self.local}/server0/ckpt-00000001/shard.bin {ckpt}/shard.bin",
            f"s3 ls --recursive {ckpt}/",
            f"s3 cp --only-show-errors {self.local}/server0/ckpt-00000001/MANIFEST {ckpt}/MANIFEST"])
        self.assertEqual(self.listing(self.there), [
            "server0/ckpt-00000001/MANIFEST", "server0/ckpt-00000001/shard.bin",
            "server1/ckpt-00000002/MANIFEST", "server1/ckpt-00000002/shard.bin"])
        # A checkpoint whose MANIFEST never arrived (an upload cut short) is not taken.
        os.makedirs(os.path.join(self.there, "server0", "ckpt-00000009"))
        with open(os.path.join(self.there, "server0", "ckpt-00000009", "shard.bin"), "wb") as f:
            f.write(b"partial")
        other = os.path.join(self._tmp.name, "other")
        r = self.sync("down", other, self.URL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.listing(other), [
            "server0/ckpt-00000001/MANIFEST", "server0/ckpt-00000001/shard.bin",
            "server1/ckpt-00000002/MANIFEST", "server1/ckpt-00000002/shard.bin"])
        with open(os.path.join(other, "server1", "ckpt-00000002", "shard.bin"), "rb") as f:
            self.assertEqual(f.read(), b"b" * 50)
        before = len(self.calls())
        self.assertEqual(self.sync("up", self.local, self.URL).stdout, "")  # nothing twice
        self.assertEqual(self.calls()[before:], [f"s3 ls --recursive {self.URL}/"])

    def test_a_checkpoint_whose_sizes_differ_is_left_out_and_removed(self):
        checkpoint(self.local, 0, 1, b"abc", listed=9)
        r = self.sync("up", self.local, self.URL)
        self.assertEqual((r.returncode, r.stdout), (0, ""))
        self.assertEqual(r.stderr, f"checkpoint_sync: copying {self.local}/server0/ckpt-00000001 "
                                   f"to {self.URL}/server0/ failed; left out\n")
        self.assertEqual(self.listing(self.s3), ["calls"])

    def test_the_newest_three_are_kept_and_watch_lists_the_url_once(self):
        for sequence in range(1, 5):
            checkpoint(self.local, 0, sequence)
        server = subprocess.Popen(["sleep", "1.5"])
        watch = subprocess.Popen([SYNC, "watch", self.local, self.URL, str(server.pid)],
                                 stderr=subprocess.PIPE, text=True, env=self.env)
        server.wait()  # reaped: gone for kill -0 too
        self.assertEqual(watch.wait(timeout=60), 0, watch.stderr.read())
        watch.stderr.close()
        self.assertEqual(sorted(os.listdir(os.path.join(self.there, "server0"))),
                         ["ckpt-00000002", "ckpt-00000003", "ckpt-00000004"])
        self.assertEqual([c for c in self.calls() if c.startswith("s3 ls")], [
            f"s3 ls --recursive {self.URL}/"] + [
            f"s3 ls --recursive {self.URL}/server0/ckpt-0000000{n}/" for n in (2, 3, 4)])
        checkpoint(self.local, 0, 5)
        self.assertEqual(self.sync("up", self.local, self.URL).returncode, 0)
        self.assertEqual(sorted(os.listdir(os.path.join(self.there, "server0"))),
                         ["ckpt-00000003", "ckpt-00000004", "ckpt-00000005"])


if __name__ == "__main__":
    junit_main.main()

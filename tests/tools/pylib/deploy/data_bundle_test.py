"""tools/pylib/deploy/data_bundle.py: the bundle's copy that carries a "bundle" data set holds
every file of the bundle, the data set's files under worker_files/NAME/ and a MANIFEST.json that
lists them too (bundle.verify passes on it unpacked); it is the same bytes every time; a data
file that is missing or differs from the manifest is refused; other sources ship the bundle as
it is."""

import hashlib
import io
import json
import os
import tarfile
import tempfile
import unittest

from pylib.cluster import bundle as release_bundle
from pylib.cluster import cluster_file
from pylib.deploy import data_bundle
from pylib.job.errors import JobError
import junit_main

SET = {"train.gz": b"t" * 5000, "sub/labels.gz": b"l"}


class DataBundleTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.dir = self._tmp.name
        bundle = os.path.join(self.dir, "b", "r2sp-1-cpu")
        files = {"bin/worker": b"\x7fELF worker", "worker_files/set/old.gz": b"old",
                 "worker_files/train.py": b"print()"}
        for rel, body in files.items():
            os.makedirs(os.path.dirname(os.path.join(bundle, rel)), exist_ok=True)
            with open(os.path.join(bundle, rel), "wb") as f:
                f.write(body)
        with open(os.path.join(bundle, "MANIFEST.json"), "w") as f:
            json.dump({"version": "1", "files": {r: hashlib.sha256(b).hexdigest()
                                                 for r, b in files.items()}}, f)
        self.tarball = os.path.join(self.dir, "r2sp-1-cpu.tar.gz")
        release_bundle.tar(bundle, self.tarball)
        for rel, body in SET.items():
            os.makedirs(os.path.dirname(os.path.join(self.dir, "set", rel)), exist_ok=True)
            with open(os.path.join(self.dir, "set", rel), "wb") as f:
                f.write(body)
        with open(os.path.join(self.dir, "set.sha256"), "w") as f:
            f.write("".join(f"{hashlib.sha256(b).hexdigest()}  {r}\n" for r, b in SET.items()))

    def cluster(self, source='"bundle"\npath = "set"'):
        path = os.path.join(self.dir, "c.toml")
        with open(path, "w") as f:
            f.write('[job]\nmode = "bsp"\n[[host]]\nname = "a"\nscheduler = true\nservers = 1\n'
                    f'workers = 1\n[data]\nname = "set"\nsource = {source}\n')
        return cluster_file.load(path)

    def test_the_copy_carries_the_data_set_and_lists_it(self):
        made = data_bundle.prepare(self.tarball, self.cluster(), os.path.join(self.dir, "out"))
        self.assertEqual(made, os.path.join(self.dir, "out", "r2sp-1-cpu.tar.gz"))
        with tarfile.open(made) as t:
            names = sorted(m.name for m in t.getmembers() if m.isfile())
            t.extractall(os.path.join(self.dir, "unpacked"), filter="data")
        self.assertEqual(names, ["r2sp-1-cpu/MANIFEST.json", "r2sp-1-cpu/bin/worker",
                                 "r2sp-1-cpu/worker_files/set/sub/labels.gz",
                                 "r2sp-1-cpu/worker_files/set/train.gz",
                                 "r2sp-1-cpu/worker_files/train.py"])
        unpacked = os.path.join(self.dir, "unpacked", "r2sp-1-cpu")
        self.assertEqual(release_bundle.verify(unpacked), [])
        with open(os.path.join(unpacked, "MANIFEST.json")) as f:
            self.assertEqual(sorted(json.load(f)["files"]), [
                "bin/worker", "worker_files/set/sub/labels.gz", "worker_files/set/train.gz",
                "worker_files/train.py"])
        with open(made, "rb") as f:
            first = f.read()
        again = data_bundle.prepare(self.tarball, self.cluster(), os.path.join(self.dir, "out2"))
        with open(again, "rb") as f:
            self.assertEqual(f.read(), first)

    def test_other_sources_ship_the_bundle_as_it_is(self):
        self.assertEqual(data_bundle.prepare(self.tarball, self.cluster('"s3://b/p"'), self.dir),
                         self.tarball)
        self.assertIsNone(data_bundle.prepare(None, self.cluster(), self.dir))

    def test_a_missing_or_changed_file_is_refused(self):
        os.remove(os.path.join(self.dir, "set", "sub", "labels.gz"))
        with self.assertRaises(JobError) as e:
            data_bundle.prepare(self.tarball, self.cluster(), self.dir)
        self.assertEqual(str(e.exception), f"data: {self.dir}/set/sub/labels.gz, listed in "
                                           f"{self.dir}/set.sha256, is missing")
        with open(os.path.join(self.dir, "set", "sub", "labels.gz"), "wb") as f:
            f.write(b"L")
        with self.assertRaises(JobError) as e:
            data_bundle.prepare(self.tarball, self.cluster(), self.dir)
        self.assertEqual(str(e.exception), (
            f"data: {self.dir}/set/sub/labels.gz's sha256 differs from {self.dir}/set.sha256's; "
            f"write the manifest again (tools/launch --write_data_manifest={self.dir}/set)"))
        with self.assertRaises(JobError) as e:
            data_bundle.prepare(self.tarball, self.cluster('"bundle"\npath = "none"'), self.dir)
        self.assertEqual(str(e.exception), f"data: path '{self.dir}/none' is not a directory (the "
                                           'data set to ship with the job, for source = "bundle")')


if __name__ == "__main__":
    junit_main.main()

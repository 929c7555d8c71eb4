"""tools/pylib/cluster/data_table.py: the [data] table read through cluster_file.parse (its
defaults, per-host caches, the staged directory's name), every malformed table refused at the
line of its problem with the exact message, and the manifest writer."""

import os
import tempfile
import unittest

from pylib.cluster import cluster_file, data_table
import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
A, B = "a" * 64, "b" * 64
HOSTS = ['[job]', 'mode = "bsp"',                                                  # 1-2
         '[[host]]', 'name = "h0"', 'scheduler = true', 'servers = 1', 'workers = 1',  # 3-7
         '[[host]]', 'name = "h1"', 'workers = 1', 'data_cache = "/scratch/d"']      # 8-11
MANIFEST = f"{A}  train.gz\n{B} *sub/test.gz\n"


class DataTableTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.path = os.path.join(self.dir, "cluster.toml")
        self.write("set.sha256", MANIFEST)

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def parse(self, *data_lines):
        """The cluster of HOSTS and a [data] table (line 12) of `data_lines` (from line 13)."""
        return cluster_file.parse("\n".join(HOSTS + ["[data]", *data_lines]) + "\n", self.path)

    def fails(self, message, *data_lines):
        with self.assertRaises(cluster_file.ClusterFileError) as e:
            self.parse(*data_lines)
        self.assertEqual(str(e.exception), f"{self.path}:{message}")

    def test_defaults_and_host_caches(self):
        data = self.parse('name = "set"', 'source = "file:///shared/set"').data
        self.assertEqual((data.name, data.source, data.cache, data.manifest_path),
                         ("set", "file:///shared/set", "~/r2sp-data",
                          os.path.join(self.dir, "set.sha256")))
        self.assertEqual(data.files, (("train.gz", A), ("sub/test.gz", B)))
        self.assertEqual(data.manifest_text, f"{A}  train.gz\n{B}  sub/test.gz\n")
        self.assertRegex(data.dir_name, r"^set-[0-9a-f]{12}$")
        h0, h1 = self.parse('name = "set"', 'source = "s3://b/p"').hosts
        self.assertEqual(data.host_dir(h0), f"~/r2sp-data/{data.dir_name}")
        self.assertEqual(data.host_dir(h1), f"/scratch/d/{data.dir_name}")
        self.assertEqual(data.source_on("/w/r2sp-1-cpu"), "file:///shared/set")

    def test_manifest_and_cache_given_and_bundle_source(self):
        self.write("other.sha256", f"{B}  x\n")
        data = self.parse('name = "set"', 'source = "bundle"', 'manifest = "other.sha256"',
                          'cache = "/data/"', 'path = "sets/set"').data
        self.assertEqual((data.files, data.cache, data.path),
                         ((("x", B),), "/data/", os.path.join(self.dir, "sets/set")))
        self.assertEqual(self.parse('name = "set"', 'source = "bundle"', 'path = "/abs"').data.path,
                         "/abs")
        self.assertEqual(data.source_on("~/w/r2sp-1-cpu/"), "file://~/w/r2sp-1-cpu/worker_files/set")
        self.assertEqual(data.host_dir(self.parse('name = "set"', 'source = "bundle"',
                                                  'manifest = "other.sha256"', 'cache = "/data/"',
                                                  'path = "d"').hosts[0]), "/data/" + data.dir_name)

    def test_a_changed_manifest_stages_elsewhere(self):
        first = self.parse('name = "set"', 'source = "https://h/p"').data.dir_name
        self.write("set.sha256", f"{A}  train.gz\n")
        self.assertNotEqual(self.parse('name = "set"', 'source = "https://h/p"').data.dir_name, first)

    def test_no_data_table(self):
        self.assertIsNone(cluster_file.parse("\n".join(HOSTS) + "\n", self.path).data)

    def test_required_keys(self):
        self.fails("12: data: name is required (the data set's cache directory)",
                   'source = "s3://b/p"')
        self.fails('12: data: source is required (file:///DIR, s3://BUCKET/PREFIX, '
                   'https://HOST/PATH or "bundle")', 'name = "set"')

    def test_bad_values(self):
        self.fails("13: data: unknown key 'url' (known: name, source, path, manifest, cache)",
                   'url = "x"')
        self.fails("15: data: path is for source = \"bundle\" only (the local directory shipped "
                   "with the job)", 'name = "set"', 'source = "s3://b/p"', 'path = "d"')
        self.fails("14: data: source = \"bundle\" needs path (the local directory shipped with "
                   "the job)", 'name = "set"', 'source = "bundle"')
        self.fails("13: data: name must be a non-empty string, not integer 3", "name = 3")
        self.fails("13: data: name 'a b' must be letters, digits, '_', '.' and '-' (and not only "
                   "dots)", 'name = "a b"', 'source = "s3://b/p"')
        self.fails("14: data: source 'ftp://h/p' must be a file:///DIR, s3://BUCKET/PREFIX or "
                   'https://HOST/PATH URL, or "bundle"', 'name = "set"', 'source = "ftp://h/p"')
        self.fails("14: data: source 'file://rel/dir' must name an absolute path (file:///DIR)",
                   'name = "set"', 'source = "file://rel/dir"')
        self.fails("14: data: source 's3:///p' names no bucket", 'name = "set"',
                   'source = "s3:///p"')
        self.fails("15: data: cache must be a non-empty string, not string ''", 'name = "set"',
                   'source = "s3://b/p"', 'cache = ""')

    def test_host_cache_must_be_a_string(self):
        with self.assertRaises(cluster_file.ClusterFileError) as e:
            cluster_file.parse("\n".join(HOSTS[:-1] + ['data_cache = 1']) + "\n", self.path)
        self.assertEqual(str(e.exception), f"{self.path}:11: host 'h1': data_cache must be a "
                                           "non-empty string, not integer 1")

    def test_manifest_problems(self):
        missing = os.path.join(self.dir, "none.sha256")
        self.fails(f"13: data: cannot read the manifest {missing}: No such file or directory "
                   "(write it with tools/launch --write_data_manifest=DIR)",
                   'name = "none"', 'source = "s3://b/p"')
        for text, problem in [
                (f"{A} train.gz\n", f"line 1: '{A} train.gz' is not 'SHA256  PATH' (64 hex "
                                    "digits, two spaces, the path; as sha256sum writes)"),
                (f"{A}  x\n\n{'z' * 64}  y\n", f"line 3: '{'z' * 64}  y' is not 'SHA256  PATH' "
                                               "(64 hex digits, two spaces, the path; as "
                                               "sha256sum writes)"),
                (f"{A}  ../x\n", "line 1: '../x' must be a relative path without '.', '..' or "
                                 "empty parts"),
                (f"{A}  /etc/x\n", "line 1: '/etc/x' must be a relative path without '.', '..' "
                                   "or empty parts"),
                (f"{A}  x\n{B}  x\n", "line 2: 'x' is listed twice (first at line 1)"),
                ("\n", "line 1: the manifest lists no files")]:
            with self.subTest(text=text):
                self.write("bad.sha256", text)
                self.fails(f"15: data: the manifest {self.dir}/bad.sha256: {problem}",
                           'name = "set"', 'source = "s3://b/p"', 'manifest = "bad.sha256"')

    def test_write_manifest(self):
        tree = os.path.join(self.dir, "tree")
        os.makedirs(os.path.join(tree, "b"))
        os.makedirs(os.path.join(tree, ".hidden"))
        for name, body in (("z.bin", b"z"), ("b/a.bin", b""), (".x.part", b"p"),
                           (".hidden/h", b"h")):
            with open(os.path.join(tree, name), "wb") as f:
                f.write(body)
        self.assertEqual(data_table.write_manifest(tree), (
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  b/a.bin\n"
            "594e519ae499312b29433b7dd8a97ff068defcba9755b6d5d00e84c524d67b06  z.bin\n"))
        os.makedirs(os.path.join(self.dir, "empty", ".only_hidden"))
        with self.assertRaisesRegex(ValueError, "holds no files"):
            data_table.write_manifest(os.path.join(self.dir, "empty"))
        with self.assertRaisesRegex(ValueError, "is not a directory"):
            data_table.write_manifest(os.path.join(tree, "z.bin"))

    def test_every_example_stages_fashion_mnist(self):
        examples = os.path.join(ROOT, "examples", "cluster")
        manifest = os.path.join(examples, "fashion-mnist.sha256")
        for name in sorted(n for n in os.listdir(examples) if n.endswith(".toml")):
            with self.subTest(example=name):
                data = cluster_file.load(os.path.join(examples, name)).data
                self.assertEqual((data.name, data.manifest_path, len(data.files)),
                                 ("fashion-mnist", manifest, 4))
                self.assertIn(data.source, ("bundle", "s3://my-bucket/datasets/fashion-mnist"))
        debian = "/usr/share/datasets/fashion-mnist"
        if os.path.isdir(debian):  # the manifest is that of Debian's package
            with open(manifest) as f:
                self.assertEqual(data_table.write_manifest(debian), f.read())

    def test_has_data_dir(self):
        self.assertTrue(data_table.has_data_dir(["--x", "--data_dir=/d"]))
        self.assertTrue(data_table.has_data_dir(["--data_dir", "/d"]))
        self.assertFalse(data_table.has_data_dir(["--data=fashion-mnist", "--data_dirs=x"]))


if __name__ == "__main__":
    junit_main.main()

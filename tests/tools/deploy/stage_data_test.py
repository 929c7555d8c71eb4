"""tools/deploy/stage_data, the program each host stages the [data] set with: a fresh cache is
filled and verified; a second call reuses every file (same inode, same mtime); a corrupt, a
truncated (partial) and a missing cached file are fetched again, a leftover .part file is
replaced; concurrent callers on one host fetch each file once (the lock); a missing source file
and a sha256 that differs after fetching fail with status 1, naming the host and the URL, and
leave no file behind; bad manifest lines fail with status 2; http:// through a server on
127.0.0.1, s3:// through the `aws` CLI (a stand-in that records its arguments)."""

import hashlib
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STAGE_DATA = os.path.join(ROOT, "tools", "deploy", "stage_data")
FILES = {"train.gz": b"training set " * 1000, "sub/labels.gz": b"labels"}
# Stands in for the aws CLI (`aws s3 cp`, recording its arguments in $S3_ROOT/calls).
FAKE_AWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_aws")


def sha(data):
    return hashlib.sha256(data).hexdigest()


class StageDataTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.source = os.path.join(self.dir, "source")
        for name, data in FILES.items():
            self.put(os.path.join(self.source, name), data)
        self.manifest = self.put(os.path.join(self.dir, "set.sha256"), "".join(
            f"{sha(data)}  {name}\n" for name, data in FILES.items()).encode())
        self.target = os.path.join(self.dir, "cache", "set-1")

    def tearDown(self):
        self._tmp.cleanup()

    def put(self, path, data):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def stage(self, source=None, manifest=None, stdin=None, env=None):
        return subprocess.run(
            [sys.executable, STAGE_DATA, "--source=" + (source or "file://" + self.source),
             "--manifest=" + (manifest or self.manifest), "--target=" + self.target,
             "--host=node7"], capture_output=True, text=True, input=stdin, timeout=60,
            env=env)

    def staged(self):
        found = {}
        for root, _, names in os.walk(self.target):
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    found[os.path.relpath(os.path.join(root, name), self.target)] = f.read()
        return found

    def ok(self, r, reused, fetched):
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"stage_data: node7: {self.target}: 2 files verified (reused "
                                   f"{reused}, fetched {fetched})\n")
        self.assertEqual(self.staged(), FILES)

    def test_stages_then_reuses(self):
        self.ok(self.stage(), 0, 2)
        before = {n: os.stat(os.path.join(self.target, n)) for n in FILES}
        self.ok(self.stage(), 2, 0)
        for name, st in before.items():
            now = os.stat(os.path.join(self.target, name))
            self.assertEqual((now.st_ino, now.st_mtime_ns), (st.st_ino, st.st_mtime_ns), name)

    def test_manifest_from_stdin(self):
        with open(self.manifest) as f:
            self.ok(self.stage(manifest="-", stdin=f.read()), 0, 2)

    def test_corrupt_partial_and_missing_files_are_fetched_again(self):
        self.ok(self.stage(), 0, 2)
        self.put(os.path.join(self.target, "train.gz"), b"X" + FILES["train.gz"][1:])  # corrupt
        self.ok(self.stage(), 1, 1)
        self.put(os.path.join(self.target, "train.gz"), FILES["train.gz"][:100])  # partial
        self.put(os.path.join(self.target, ".train.gz.part"), b"left by a killed staging")
        os.remove(os.path.join(self.target, "sub", "labels.gz"))
        self.ok(self.stage(), 0, 2)

    def test_concurrent_callers_fetch_once(self):
        procs = [subprocess.Popen(
            [sys.executable, STAGE_DATA, "--source=file://" + self.source,
             "--manifest=" + self.manifest, "--target=" + self.target, "--host=node7"],
            stdout=subprocess.PIPE, text=True) for _ in range(4)]
        outs = [p.communicate(timeout=60)[0] for p in procs]
        self.assertEqual([p.returncode for p in procs], [0] * 4)
        self.assertEqual(sorted(o.split("(")[1] for o in outs),
                         ["reused 0, fetched 2)\n"] + ["reused 2, fetched 0)\n"] * 3)
        self.assertEqual(self.staged(), FILES)

    def test_missing_source_names_the_host_and_url(self):
        os.remove(os.path.join(self.source, "sub", "labels.gz"))
        r = self.stage()
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        url = f"file://{self.source}/sub/labels.gz"
        self.assertEqual(r.stderr, f"stage_data: node7: error: cannot fetch {url}: [Errno 2] No "
                                   f"such file or directory: '{self.source}/sub/labels.gz'\n")
        self.assertEqual(self.staged(), {"train.gz": FILES["train.gz"]})  # no .part left

    def test_a_changed_source_fails_the_check(self):
        self.put(os.path.join(self.source, "train.gz"), b"another training set")
        r = self.stage()
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, (
            f"stage_data: node7: error: file://{self.source}/train.gz: sha256 "
            f"{sha(b'another training set')} differs from the manifest's "
            f"{sha(FILES['train.gz'])} (a wrong manifest or a changed source: write it again "
            "with tools/launch --write_data_manifest)\n"))
        self.assertEqual(self.staged(), {})

    def test_bad_manifests(self):
        for text, problem in [("not a manifest\n", "line 1: 'not a manifest' is not 'SHA256  "
                               "PATH' (64 hex digits, two spaces, the path; as sha256sum writes)"),
                              (f"{'a' * 64}  ../up\n", "line 1: '../up' must be a relative path "
                               "without '.', '..' or empty parts"),
                              ("", "line 1: the manifest lists no files")]:
            with self.subTest(text=text):
                r = self.stage(manifest="-", stdin=text)
                self.assertEqual((r.returncode, r.stderr), (2, f"stage_data: node7: error: "
                                                               f"manifest -: {problem}\n"))
        r = self.stage(manifest=os.path.join(self.dir, "none"))
        self.assertEqual((r.returncode, r.stderr), (2, (
            f"stage_data: node7: error: manifest {self.dir}/none: [Errno 2] No such file or "
            f"directory: '{self.dir}/none'\n")))
        r = self.stage(source="ftp://h/p")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--source=ftp://h/p: give a file://..., s3://..., https://..., http://... "
                      "URL", r.stderr)

    def test_http(self):
        source = self.source

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=source, **kwargs)

            def log_message(self, *_):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        self.ok(self.stage(source=url), 0, 2)
        os.remove(os.path.join(self.target, "train.gz"))
        os.remove(os.path.join(self.source, "train.gz"))
        r = self.stage(source=url)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, f"stage_data: node7: error: cannot fetch {url}train.gz: HTTP "
                                   "Error 404: File not found\n")

    def test_s3_through_the_aws_cli(self):
        s3 = os.path.join(self.dir, "s3")
        for name, data in FILES.items():
            self.put(os.path.join(s3, "bucket", "sets", name), data)
        bin_dir = os.path.join(self.dir, "bin")
        os.makedirs(bin_dir)
        os.symlink(FAKE_AWS, os.path.join(bin_dir, "aws"))
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], S3_ROOT=s3)
        self.ok(self.stage(source="s3://bucket/sets", env=env), 0, 2)
        with open(os.path.join(s3, "calls")) as f:
            calls = f.read().splitlines()
        self.assertEqual(sorted(calls), sorted(
            f"s3 cp --only-show-errors s3://bucket/sets/{n} {self.target}/"
            f"{os.path.dirname(n) + '/' if '/' in n else ''}.{os.path.basename(n)}.part"
            for n in FILES))
        os.remove(os.path.join(s3, "bucket", "sets", "train.gz"))
        os.remove(os.path.join(self.target, "train.gz"))
        r = self.stage(source="s3://bucket/sets", env=env)
        self.assertEqual((r.returncode, r.stderr), (1, (
            "stage_data: node7: error: aws s3 cp s3://bucket/sets/train.gz: fatal error: An "
            "error occurred (404) when calling the HeadObject operation\n")))


if __name__ == "__main__":
    junit_main.main()

"""Tests of examples/pytorch/make_cifar_like.py: the six files in CIFAR-10's binary format,
the same bytes from the same seed, bad counts refused."""

import contextlib
import hashlib
import io
import os
import sys
import tempfile
import unittest

import example_paths

example_paths.use_torch_python()
import make_cifar_like  # noqa: E402

import junit_main  # noqa: E402

NAMES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


def digest(directory):
    h = hashlib.sha256()
    for name in NAMES:
        with open(os.path.join(directory, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


class MakeCifarLikeTest(unittest.TestCase):
    def test_six_files_of_whole_records_with_labels_0_to_9(self):
        with tempfile.TemporaryDirectory() as d:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(make_cifar_like.main([d, "--train_per_batch=7",
                                                       "--test_records=5"]), 0)
            self.assertEqual(out.getvalue(), "wrote 6 CIFAR-10-format files of random data "
                                             f"(not CIFAR-10) into {d}\n")
            self.assertEqual(sorted(os.listdir(d)), sorted(NAMES))
            for name in NAMES:
                with open(os.path.join(d, name), "rb") as f:
                    data = f.read()
                count = 5 if name == "test_batch.bin" else 7
                self.assertEqual(len(data), count * 3073)
                self.assertTrue(all(data[r * 3073] < 10 for r in range(count)))

    def test_same_seed_same_bytes_other_seed_other_bytes(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b, \
                tempfile.TemporaryDirectory() as c:
            make_cifar_like.write(a, 3, 2, seed=9)
            make_cifar_like.write(b, 3, 2, seed=9)
            make_cifar_like.write(c, 3, 2, seed=10)
            self.assertEqual(digest(a), digest(b))
            self.assertNotEqual(digest(a), digest(c))

    def test_bad_counts_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
                make_cifar_like.main([d, "--test_records=0"])
            self.assertEqual(e.exception.code, 2)
            self.assertTrue(err.getvalue().endswith(
                "error: --train_per_batch and --test_records must be at least 1\n"))
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    junit_main.main()

"""Tests of examples/pytorch/r2sp_examples/datasets.py: the idx and CIFAR-10 readers on files
the tests write (gzip and plain), every malformed file's DataError, normalisation and the
augmentation."""

import gzip
import os
import struct
import tempfile
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
if HAVE_TORCH:
    import torch
    from r2sp_examples import datasets

import junit_main  # noqa: E402


def idx_images(count, rows, cols, pixels=None):
    pixels = bytes(range(count * rows * cols)) if pixels is None else pixels
    return struct.pack(">IIII", 0x803, count, rows, cols) + pixels


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class IdxTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data, gz=False):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(gzip.compress(data) if gz else data)
        return path

    def write_set(self, prefix, count, gz):
        suffix = ".gz" if gz else ""
        self.write(f"{prefix}-images-idx3-ubyte{suffix}", idx_images(count, 2, 3), gz)
        self.write(f"{prefix}-labels-idx1-ubyte{suffix}", idx_labels([i % 10 for i in range(count)]), gz)

    def test_reads_plain_and_gzip_files_alike(self):
        for gz in (False, True):
            with self.subTest(gz=gz):
                images = self.write("i", idx_images(2, 2, 3), gz)
                labels = self.write("l", idx_labels([7, 3]), gz)
                x, y = datasets.load_idx(images, labels)
                self.assertEqual(x.dtype, torch.uint8)
                self.assertEqual(x.tolist(), [[[[0, 1, 2], [3, 4, 5]]], [[[6, 7, 8], [9, 10, 11]]]])
                self.assertEqual(y.tolist(), [7, 3])

    def test_fashion_mnist_finds_plain_before_gzip_and_normalises(self):
        self.write_set("train", 3, gz=False)
        self.write_set("t10k", 2, gz=True)
        train, test = datasets.fashion_mnist(self.dir)
        self.assertEqual((len(train), len(test)), (3, 2))
        x, y = train[1]
        self.assertEqual(tuple(x.shape), (1, 2, 3))
        self.assertEqual(int(y), 1)
        expected = (6 / 255 - 0.2860) / 0.3530  # pixel 6 is item 1's first
        self.assertAlmostEqual(float(x[0, 0, 0]), expected, places=6)

    def test_malformed_files_name_the_file_and_the_fault(self):
        cases = [
            (b"\x00\x00\x08\x04" + bytes(12), idx_labels([1]),
             "{i}: not an idx image file (expected magic 0x00000803 and a 16-byte header)"),
            (idx_images(1, 2, 3), b"\x00\x00\x08\x01",
             "{l}: not an idx label file (expected magic 0x00000801 and an 8-byte header)"),
            (idx_images(2, 2, 3, bytes(11)), idx_labels([1, 2]),
             "{i}: header says 2 images of 2x3 (28 bytes) but the file has 27 bytes"),
            (idx_images(1, 0, 3, b""), idx_labels([1]), "{i}: bad image size 0x3"),
            (idx_images(1, 2, 3), struct.pack(">II", 0x801, 3) + b"\x01",
             "{l}: header says 3 labels but the file has 1 label bytes"),
            (idx_images(1, 2, 3), idx_labels([1, 2]), "{l} has 2 labels but {i} has 1 images"),
            (idx_images(2, 2, 3), idx_labels([1, 10]), "{l}: item 1 has label 10, not in 0..9"),
        ]
        for images, labels, message in cases:
            with self.subTest(message=message):
                i, l = self.write("bad-i", images), self.write("bad-l", labels)
                with self.assertRaises(datasets.DataError) as e:
                    datasets.load_idx(i, l)
                self.assertEqual(str(e.exception), message.format(i=i, l=l))

    def test_truncated_gzip_and_missing_files(self):
        whole = gzip.compress(idx_images(4, 2, 3))
        path = self.write("cut.gz", whole[:len(whole) // 2])
        with self.assertRaises(datasets.DataError) as e:
            datasets.read_maybe_gzip(path)
        self.assertTrue(str(e.exception).startswith(f"{path}: corrupt or truncated gzip data ("),
                        str(e.exception))
        missing = os.path.join(self.dir, "train-images-idx3-ubyte.gz")
        with self.assertRaises(datasets.DataError) as e:
            datasets.fashion_mnist(self.dir)
        self.assertEqual(str(e.exception), f"{missing}: no such file")


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class CifarTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_records_split_into_label_and_channels(self):
        record = bytes([4]) + bytes([1]) * 1024 + bytes([2]) * 1024 + bytes([3]) * 1024
        x, y = datasets.parse_cifar_batch(record * 2, "b")
        self.assertEqual(tuple(x.shape), (2, 3, 32, 32))
        self.assertEqual(y.tolist(), [4, 4])
        self.assertEqual(x[1, :, 5, 7].tolist(), [1, 2, 3])

    def test_cifar10_reads_six_files_and_normalises(self):
        for i in range(1, 6):
            self.write(f"data_batch_{i}.bin", bytes([i]) + bytes([255]) * 3072)
        self.write("test_batch.bin", bytes([9]) + bytes(3072))
        train, test = datasets.cifar10(self.tmp.name)
        self.assertEqual([int(train[i][1]) for i in range(5)], [1, 2, 3, 4, 5])
        x, y = test[0]
        self.assertEqual(int(y), 9)
        self.assertAlmostEqual(float(x[2, 0, 0]), -0.4465 / 0.2616, places=5)

    def test_malformed_batches(self):
        cases = [(b"", "{p}: 0 bytes is not a whole number of 3073-byte CIFAR-10 records"),
                 (bytes(3074), "{p}: 3074 bytes is not a whole number of 3073-byte CIFAR-10 records"),
                 (bytes(3073) + bytes([12]) + bytes(3072), "{p}: record 1 has label 12, not in 0..9")]
        for data, message in cases:
            with self.subTest(message=message):
                path = self.write("bad.bin", data)
                with self.assertRaises(datasets.DataError) as e:
                    datasets.load_cifar_batches([path])
                self.assertEqual(str(e.exception), message.format(p=path))


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class DataDirAndAugmentTest(unittest.TestCase):
    def test_data_dir_flag_then_environment_then_default(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            old = os.environ.pop("R2SP_DATA_DIR", None)
            try:
                self.assertEqual(datasets.data_dir_for("", b), b)
                os.environ["R2SP_DATA_DIR"] = a
                self.assertEqual(datasets.data_dir_for("", b), a)
                self.assertEqual(datasets.data_dir_for(b, ""), b)
                del os.environ["R2SP_DATA_DIR"]
                with self.assertRaises(datasets.DataError) as e:
                    datasets.data_dir_for("", "")
                self.assertEqual(str(e.exception),
                                 "no data directory: pass --data_dir=DIR or set R2SP_DATA_DIR")
                with self.assertRaises(datasets.DataError) as e:
                    datasets.data_dir_for(os.path.join(a, "nope"), "")
                self.assertEqual(str(e.exception),
                                 f"{a}/nope: not a directory (--data_dir or R2SP_DATA_DIR)")
            finally:
                if old is not None:
                    os.environ["R2SP_DATA_DIR"] = old

    def test_crop_and_flip_keep_shape_and_pixels(self):
        image = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(1, 2, 4, 4)
        base = torch.utils.data.TensorDataset(image, torch.tensor([3]))
        torch.manual_seed(5)
        seen = set()
        for _ in range(50):
            x, y = datasets.RandomCropFlip(base, pad=1)[0]
            self.assertEqual((tuple(x.shape), int(y)), ((2, 4, 4), 3))
            # Every output pixel is an input pixel of the same channel or padding.
            self.assertTrue(set(x[1].flatten().tolist()) <= set(range(16, 32)) | {0.0})
            seen.add(tuple(x.flatten().tolist()))
        self.assertGreater(len(seen), 4)  # 9 crops x 2 flips: the draws vary


if __name__ == "__main__":
    junit_main.main()

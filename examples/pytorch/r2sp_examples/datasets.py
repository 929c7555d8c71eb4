"""Readers for the data sets the examples train on, straight from their files: Fashion-MNIST
(and MNIST) in the idx format, gzip-compressed or plain, and CIFAR-10's binary batches. They
read the same files as the C++ worker (models/data/dataset.cc), normalise the same way, and
refuse a malformed file with a DataError naming the file and what is wrong with it."""

import gzip
import os
import struct

import torch

DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
IDX_IMAGES_MAGIC = 0x00000803
IDX_LABELS_MAGIC = 0x00000801
CIFAR_RECORD = 1 + 3 * 32 * 32
NUM_CLASSES = 10
# Per-channel (mean, std) of the pixels scaled to [0, 1], as the C++ worker normalises them.
FASHION_MNIST_NORM = ((0.2860,), (0.3530,))
CIFAR10_NORM = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))


class DataError(ValueError):
    """A data file is missing, malformed or inconsistent; the message names the file."""


def read_maybe_gzip(path):
    """The whole (decompressed) contents of `path`: gzip when it starts with gzip's magic."""
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file")
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: corrupt or truncated gzip data ({e})") from None


def as_uint8(data):
    """A uint8 tensor holding a copy of `data` (torch.frombuffer refuses an empty buffer)."""
    if not data:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def parse_idx_images(data, path):
    """uint8 tensor [count, 1, rows, cols] from an idx image file's bytes."""
    if len(data) < 16 or struct.unpack(">I", data[:4])[0] != IDX_IMAGES_MAGIC:
        raise DataError(f"{path}: not an idx image file (expected magic 0x00000803 and a "
                        "16-byte header)")
    count, rows, cols = struct.unpack(">III", data[4:16])
    if not (0 < rows <= 4096 and 0 < cols <= 4096):
        raise DataError(f"{path}: bad image size {rows}x{cols}")
    want = 16 + count * rows * cols
    if len(data) != want:
        raise DataError(f"{path}: header says {count} images of {rows}x{cols} ({want} bytes) "
                        f"but the file has {len(data)} bytes")
    return as_uint8(data[16:]).reshape(count, 1, rows, cols)


def parse_idx_labels(data, path):
    """int64 tensor [count] from an idx label file's bytes; every label in 0..9."""
    if len(data) < 8 or struct.unpack(">I", data[:4])[0] != IDX_LABELS_MAGIC:
        raise DataError(f"{path}: not an idx label file (expected magic 0x00000801 and an "
                        "8-byte header)")
    count = struct.unpack(">I", data[4:8])[0]
    if len(data) != 8 + count:
        raise DataError(f"{path}: header says {count} labels but the file has "
                        f"{len(data) - 8} label bytes")
    labels = as_uint8(data[8:]).to(torch.int64)
    check_labels(labels, path, "item")
    return labels


def check_labels(labels, path, what):
    bad = (labels >= NUM_CLASSES).nonzero()
    if len(bad):
        i = int(bad[0])
        raise DataError(f"{path}: {what} {i} has label {int(labels[i])}, not in 0..9")


def load_idx(images_path, labels_path):
    """(uint8 images [N, 1, H, W], int64 labels [N]) from an idx pair whose counts agree."""
    images = parse_idx_images(read_maybe_gzip(images_path), images_path)
    labels = parse_idx_labels(read_maybe_gzip(labels_path), labels_path)
    if len(images) != len(labels):
        raise DataError(f"{labels_path} has {len(labels)} labels but {images_path} has "
                        f"{len(images)} images")
    return images, labels


def idx_path(data_dir, stem):
    """DIR/STEM if it exists, else DIR/STEM.gz (as the C++ loader looks)."""
    plain = os.path.join(data_dir, stem)
    return plain if os.path.exists(plain) else plain + ".gz"


def parse_cifar_batch(data, path):
    """(uint8 images [N, 3, 32, 32], int64 labels [N]) from one CIFAR-10 binary batch."""
    if not data or len(data) % CIFAR_RECORD:
        raise DataError(f"{path}: {len(data)} bytes is not a whole number of 3073-byte "
                        "CIFAR-10 records")
    records = as_uint8(data).reshape(-1, CIFAR_RECORD)
    labels = records[:, 0].to(torch.int64)
    check_labels(labels, path, "record")
    return records[:, 1:].reshape(-1, 3, 32, 32).contiguous(), labels


def load_cifar_batches(paths):
    """The records of several CIFAR-10 batch files, in order."""
    parts = [parse_cifar_batch(read_maybe_gzip(p), p) for p in paths]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


class ImageSet(torch.utils.data.Dataset):
    """Images kept as uint8 (a quarter of the memory of floats), each normalised when read:
    (x / 255 - mean) / std per channel. Item i: (float32 [C, H, W], int64 label)."""

    def __init__(self, images, labels, norm):
        self.images, self.labels = images, labels
        self.mean = torch.tensor(norm[0]).view(-1, 1, 1)
        self.std = torch.tensor(norm[1]).view(-1, 1, 1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return (self.images[i].to(torch.float32) / 255 - self.mean) / self.std, self.labels[i]


def data_dir_for(flag, default=""):
    """The data directory: --data_dir, else $R2SP_DATA_DIR (set by tools/launch), else
    `default`; DataError when none is given or it is not a directory."""
    data_dir = flag or os.environ.get("R2SP_DATA_DIR", "") or default
    if not data_dir:
        raise DataError("no data directory: pass --data_dir=DIR or set R2SP_DATA_DIR")
    if not os.path.isdir(data_dir):
        raise DataError(f"{data_dir}: not a directory (--data_dir or R2SP_DATA_DIR)")
    return data_dir


def fashion_mnist(data_dir):
    """(train, test) ImageSets from DIR's {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]."""
    sets = []
    for prefix in ("train", "t10k"):
        images, labels = load_idx(idx_path(data_dir, f"{prefix}-images-idx3-ubyte"),
                                  idx_path(data_dir, f"{prefix}-labels-idx1-ubyte"))
        sets.append(ImageSet(images, labels, FASHION_MNIST_NORM))
    return sets[0], sets[1]


def cifar10(data_dir):
    """(train, test) ImageSets from DIR/data_batch_{1..5}.bin and DIR/test_batch.bin."""
    train = load_cifar_batches([os.path.join(data_dir, f"data_batch_{i}.bin") for i in range(1, 6)])
    test = load_cifar_batches([os.path.join(data_dir, "test_batch.bin")])
    return ImageSet(*train, CIFAR10_NORM), ImageSet(*test, CIFAR10_NORM)


class RandomCropFlip(torch.utils.data.Dataset):
    """CIFAR-10's usual augmentation, as the C++ worker's --augment: each read pads the image
    by `pad` zeros, takes a random crop of the original size and flips it left-right with
    probability 1/2 (torch's global generator: torch.manual_seed makes it repeatable)."""

    def __init__(self, base, pad=4):
        self.base, self.pad = base, pad

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        x, y = self.base[i]
        h, w = x.shape[1:]
        padded = torch.nn.functional.pad(x, (self.pad,) * 4)
        top, left = torch.randint(0, 2 * self.pad + 1, (2,)).tolist()
        x = padded[:, top:top + h, left:left + w]
        if torch.rand(()) < 0.5:
            x = x.flip(2)
        return x, y

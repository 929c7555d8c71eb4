"""Tests of examples/pytorch/resnet18_cifar.py: torchvision's ResNet-18 trains a few steps on
files make_cifar_like.py writes (--backend=single), its training set augmented and its test
set not; a missing --data_dir gets a message."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
if HAVE_TORCH:
    import torch
    import make_cifar_like
    import resnet18_cifar
    from r2sp_examples import datasets

import junit_main  # noqa: E402

SCRIPT = os.path.join(example_paths.EXAMPLES, "resnet18_cifar.py")


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class ResNet18Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        make_cifar_like.write(cls.tmp.name, train_per_batch=4, test_records=6, seed=3)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_data_train_augmented_test_plain(self):
        train, test = resnet18_cifar.load_data(self.tmp.name)
        self.assertIsInstance(train, datasets.RandomCropFlip)
        self.assertIsInstance(test, datasets.ImageSet)
        self.assertEqual((len(train), len(test)), (20, 6))

    def test_model_is_torchvisions_resnet18_with_ten_classes(self):
        model = resnet18_cifar.build_model()
        self.assertEqual(sum(p.numel() for p in model.parameters()), 11181642)
        self.assertEqual(tuple(model(torch.zeros(2, 3, 32, 32)).shape), (2, 10))

    def test_single_trains_the_steps_asked(self):
        out = subprocess.run([sys.executable, SCRIPT, "--backend=single", "--max_steps=3",
                              "--batch_size=4", "--threads=1", f"--data_dir={self.tmp.name}"],
                             capture_output=True, text=True, timeout=180)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(len(lines), 2)
        self.assertTrue(lines[0].startswith("epoch 1: test accuracy ") and
                        lines[0].endswith("(3 steps)"), lines[0])
        line = json.loads(lines[1])
        self.assertEqual({k: line[k] for k in ("backend", "steps", "samples")},
                         {"backend": "single", "steps": 3, "samples": 12})
        self.assertEqual(line["test_accuracy"] * 6, round(line["test_accuracy"] * 6))

    def test_no_data_dir_says_where_to_point_it(self):
        env = {k: v for k, v in os.environ.items() if k != "R2SP_DATA_DIR"}
        out = subprocess.run([sys.executable, SCRIPT, "--backend=single"], capture_output=True,
                             text=True, timeout=60, env=env)
        self.assertEqual((out.returncode, out.stderr),
                         (2, "error: no data directory: pass --data_dir=DIR or set "
                             "R2SP_DATA_DIR\n"))


if __name__ == "__main__":
    junit_main.main()

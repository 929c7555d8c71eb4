"""--init=builtin (r2sp_examples/builtin_init.py): the PyTorch cnn starts from exactly the
values the C++ worker draws for the built-in cnn with the same seed; a model with no built-in
counterpart, or with other parameters, is refused with a SetupError saying why."""

import os
import sys
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
import junit_main  # noqa: E402

CORE_DIR = os.path.join(os.environ.get("R2SP_BIN_DIR", example_paths.ROOT), "worker", "python")


def cannot_run():
    if not HAVE_TORCH:
        return example_paths.NO_TORCH
    if not os.path.exists(os.path.join(CORE_DIR, "_core.so")):
        return f"needs the built extension in {CORE_DIR}"
    return None


@unittest.skipIf(cannot_run(), cannot_run())
class BuiltinInitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.environ["R2SP_CORE"] = os.path.join(CORE_DIR, "_core.so")
        sys.path.insert(0, os.path.join(example_paths.ROOT, "worker", "python"))
        sys.path.insert(0, example_paths.EXAMPLES)

    def test_the_cnn_starts_from_the_built_in_cnns_values(self):
        import torch
        import fashion_mnist_cnn
        import r2sp
        from r2sp_examples import builtin_init
        model = fashion_mnist_cnn.Cnn()
        builtin_init.load(model, ("cnn", (1, 28, 28), 10), 7)
        expected = {n: raw for n, _, raw in r2sp.builtin_parameters("cnn", (1, 28, 28), 10, 7)}
        for name, p in model.named_parameters():
            self.assertEqual(p.detach().numpy().tobytes(), expected[name], name)
        self.assertEqual(len(list(model.parameters())), 8)
        self.assertIsInstance(model.conv1.weight, torch.nn.Parameter)

    def test_models_without_a_built_in_counterpart_are_refused(self):
        import torch
        from r2sp_examples import backends, builtin_init
        with self.assertRaises(backends.SetupError) as none:
            builtin_init.load(torch.nn.Linear(3, 2), None, 1)
        self.assertEqual(str(none.exception), "--init=builtin: this script's model is not one of "
                         "R2SP's built-in models (mlp, cnn, resnet20); use --init=torch")
        with self.assertRaises(backends.SetupError) as other:
            builtin_init.load(torch.nn.Linear(3, 2), ("cnn", (1, 28, 28), 10), 1)
        self.assertEqual(str(other.exception), "--init=builtin: the model's parameters ['bias', "
                         "'weight'] are not the built-in cnn's ['conv1.bias', 'conv1.weight', "
                         "'conv2.bias', 'conv2.weight', 'fc1.bias', 'fc1.weight', 'fc2.bias', "
                         "'fc2.weight']")


if __name__ == "__main__":
    junit_main.main()

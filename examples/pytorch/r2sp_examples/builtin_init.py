"""--init=builtin: start a PyTorch model that is one of R2SP's built-in models written in
PyTorch (the cnn) from exactly the initial parameters the C++ worker draws for it
(r2sp.builtin_parameters: models::InitParams with the same seed), so that the script
and the built-in model, given the same seed, lr and batches, train the same numbers."""

import torch

from . import backends


def load(model, builtin, seed):
    """Copies the built-in model's initial values into `model`'s parameters by name.
    `builtin`: (model name, (channels, height, width), classes), or None (SetupError: this
    script's model has no C++ counterpart)."""
    if builtin is None:
        raise backends.SetupError("--init=builtin: this script's model is not one of R2SP's "
                                  "built-in models (mlp, cnn, resnet20); use --init=torch")
    try:
        import r2sp
    except ImportError as e:
        raise backends.SetupError(f"--init=builtin needs the r2sp package: {e}") from e
    name, chw, classes = builtin
    values = {n: (shape, raw) for n, shape, raw in
              r2sp.builtin_parameters(name, chw, classes, seed)}
    params = dict(model.named_parameters())
    if set(params) != set(values):
        raise backends.SetupError(
            f"--init=builtin: the model's parameters {sorted(params)} are not the built-in "
            f"{name}'s {sorted(values)}")
    with torch.no_grad():
        for n, p in params.items():
            shape, raw = values[n]
            if list(p.shape) != shape:
                raise backends.SetupError(f"--init=builtin: {n} has shape {list(p.shape)}, the "
                                          f"built-in {name}'s {shape}")
            p.copy_(torch.frombuffer(bytearray(raw), dtype=torch.float32).view(shape))

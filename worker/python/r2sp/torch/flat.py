"""What CpuBuffers (device.py) and CudaBuffers (cuda.py) share: a model's parameters staged
into the worker's host parameter buffer before join, and its gradients kept as views into one
flat gradient tensor (the worker's own on a CPU, a device tensor on CUDA)."""

import torch


class FlatGradients:
    """`entries` (device.Entry) over `host_params` (the worker's parameter buffer) and `grads`
    (the flat tensor the parameters' .grad are views of); subclasses set both."""

    entries = ()
    host_params = grads = None

    def stage(self):
        """Copies each parameter's value into worker.params (before join)."""
        with torch.no_grad():
            for e in self.entries:
                e.span(self.host_params).copy_(e.param.detach().reshape(-1))

    def own_gradient(self, entry):
        """Makes entry's .grad its view of `grads` again, holding the gradient autograd left
        elsewhere (a gradient set to None and replaced) or zeros when it has none."""
        view = entry.view(self.grads)
        grad = entry.param.grad
        if grad is None or grad.is_sparse or grad.data_ptr() != view.data_ptr():
            with torch.no_grad():
                if grad is None:
                    view.zero_()
                else:  # an embedding's sparse gradient goes in dense (the pushes skip zero rows)
                    view.copy_(grad.to_dense() if grad.is_sparse else grad)
            entry.param.grad = view

    def fill_zero(self, entry):
        """A gradient autograd did not produce this step: zeros."""
        view = entry.view(self.grads)
        view.zero_()
        entry.param.grad = view

    def zero_grad(self):
        """Zeroes every gradient in one fill, keeping them views of `grads`."""
        self.grads.zero_()
        for e in self.entries:
            view = e.view(self.grads)
            grad = e.param.grad
            if grad is None or grad.is_sparse or grad.data_ptr() != view.data_ptr():
                e.param.grad = view

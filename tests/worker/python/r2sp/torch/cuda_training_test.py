"""r2sp.torch's CUDA path (cuda.CudaBuffers: device tensors staged through the worker's host
buffers) in real jobs: two torch workers on the GPU training the known gradients in bsp
(known_train.py with KNOWN_DEVICE=cuda) end with the C++ workers' parameters bit for bit, with
fp32 and fp16 pushes (the fp16 encoded on the GPU before the copy), with and without pushes
overlapped with backward, and with pulls landing during backward (--early_pulls). Skipped where torch sees no CUDA device (CI, this project's build
machines): tools/bench/gpu_checks runs it on a GPU machine, step `pytorch`."""

import os
import unittest

import job_harness
import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import torch  # noqa: E402

KNOWN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_train.py")
SYNTHETIC = ["--model=synthetic", "--model_mb=0.015625", "--layers=2", "--grad=known",
             "--init=zero", "--iterations=6"]


def cannot_run():
    if SKIP or job_harness.cannot_run():
        return SKIP or job_harness.cannot_run()
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


class Job(job_harness.Job):
    """A bsp job (one server, plain SGD with momentum) of two workers."""

    def __init__(self):
        super().__init__("r2sp_torch_cuda", 2, scheduler_flags=["--sync=bsp"],
                         server_flags=["--lr=0.1", "--momentum=0.9"])

    def torch_worker(self, index, flags, out):
        env = dict({k: v for k, v in os.environ.items() if k != "R2SP_SCHEDULER"},
                   R2SP_SCHEDULER=self.endpoint, RANK=str(index), KNOWN_DEVICE="cuda",
                   R2SP_WORKER_FLAGS=" ".join(["--bind=tcp://127.0.0.1:*", *job_harness.NODE,
                                               "--batch_size=4", *flags]),
                   R2SP_CORE=r2sp_testing.core_path(),
                   PYTHONPATH=os.path.join(r2sp_testing.ROOT, "worker", "python"))
        return self.python_worker(f"worker{index}", KNOWN, [out], env=env)


@unittest.skipIf(cannot_run(), cannot_run() or "")
class CudaTrainingTest(unittest.TestCase):
    def run_job(self, kind, flags):
        """The final parameters of each worker of a job of C++ ('c') or CUDA torch ('p')
        workers with these worker flags."""
        job = Job()
        self.addCleanup(job.close)
        procs, outs = [], []
        for i in range(2):
            outs.append(job.path(f"{kind}{i}.params"))
            if kind == "c":
                procs.append(job.cpp_worker(f"worker{i}",
                                            SYNTHETIC + flags + ["--dump_params=" + outs[-1]]))
            else:  # 48 samples in 2 shards of 24: 6 steps of 4, as the C++ workers' 6
                procs.append(job.torch_worker(i, flags, outs[-1]))
        self.assertEqual(job.wait(procs), [0, 0], job.log("worker0") + job.log("worker1"))
        finals = []
        for out in outs:
            with open(out, "rb") as f:
                finals.append(f.read())
        return finals

    def test_cuda_workers_end_with_the_cpp_workers_parameters_bit_for_bit(self):
        # Pulls during backward (--early_pulls with --overlap) only where the compute reads a
        # copy of the parameters: the CUDA workers, against C++ workers without them.
        early = ["--early_pulls", "--bucket_bytes=0"]
        for flags, cuda_flags in (([], []), (["--push_codec=fp16"], []), (["--overlap"], []),
                                  (["--overlap", "--push_codec=fp16"], []),
                                  (["--overlap"], early),
                                  (["--overlap", "--push_codec=fp16"], early)):
            with self.subTest(flags=flags, cuda_flags=cuda_flags):
                expected = self.run_job("c", flags)
                self.assertEqual(len(expected[0]), 4096 * 4)
                self.assertNotEqual(expected[0], bytes(4096 * 4))
                self.assertEqual(expected[1], expected[0])
                self.assertEqual(self.run_job("p", flags + cuda_flags), expected)


if __name__ == "__main__":
    junit_main.main()

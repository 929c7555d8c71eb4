"""An embedding's sparse gradients in real jobs (embedding_train.py, two Python workers, bsp):
with nn.Embedding(sparse=True) each push sends the chunks of the rows its batch touched and the
linear layer's, ids and values, in place of the whole table, and the job ends with the
parameters of the same job with a dense embedding, bit for bit; also when the script clears
its gradients to None, so that .grad itself arrives sparse."""

import json
import os
import unittest

import training_test

import junit_main  # noqa: E402  (training_test set up the path)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "embedding_train.py")
TABLE, LINEAR = 64 * 64, 64 * 4 + 4  # values; the linear layer's are 5 chunks (64, 64, 64, 64, 4)
CHUNK = 64  # PsClient::kRowChunk


def sparse_push_bytes(rows):
    """What a push of a step touching `rows` sends: a chunk id and the values of each row and
    of the linear layer's 5 chunks."""
    chunks = len(rows) + 5
    return chunks * 4 + (len(rows) * CHUNK + LINEAR) * 4


@unittest.skipIf(training_test.cannot_run(), training_test.cannot_run() or "")
class EmbeddingJobTest(unittest.TestCase):
    def run_job(self, **env):
        """Both workers' outputs of a 2-worker bsp job of embedding_train.py."""
        job = training_test.Job(workers=2)
        self.addCleanup(job.close)
        outs = [job.path(f"out{i}.json") for i in range(2)]
        workers = [job.torch_worker(i, "--epochs=2 --batch_size=4", outs[i], script=SCRIPT,
                                    script_env=env) for i in range(2)]
        self.assertEqual(job.wait(workers), [0, 0], job.log("worker0") + job.log("worker1"))
        results = []
        for out in outs:
            with open(out) as f:
                results.append(json.load(f))
        self.assertEqual(results[0]["final"], results[1]["final"])
        return results

    def check_sparse(self, **env):
        dense = self.run_job(SPARSE="0")
        sparse = self.run_job(SPARSE="1", **env)
        self.assertEqual(sparse[0]["final"], dense[0]["final"])
        for rank in range(2):
            steps = dense[rank]["rows"]
            self.assertEqual(len(steps), 8)  # 2 epochs of 16 samples in batches of 4
            self.assertEqual(sparse[rank]["rows"], steps)
            whole = (TABLE + LINEAR) * 4
            init = dense[rank]["finish"]["bytes_pushed"] - len(steps) * whole
            self.assertEqual(init, whole if rank == 0 else 0)  # worker 0's values start the job
            self.assertEqual(sparse[rank]["finish"]["bytes_pushed"],
                             init + sum(sparse_push_bytes(rows) for rows in steps))
            self.assertEqual(sparse[rank]["finish"]["pushes"], dense[rank]["finish"]["pushes"])

    def test_sparse_embedding_pushes_send_the_touched_rows(self):
        self.check_sparse()

    def test_sparse_gradients_replacing_the_buffers_view(self):
        self.check_sparse(ZERO_TO_NONE="1")


if __name__ == "__main__":
    junit_main.main()

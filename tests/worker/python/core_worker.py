"""A Python worker of r2sp._core for the tests (core_test.py): trains the C++ synthetic model's
tensors with the synthetic workload's known gradients (FillKnownGradient), so its pushes equal
a C++ `worker --model=synthetic --grad=known`'s, and records what it saw.

usage: core_worker.py CORE_DIR OUT_PREFIX TRAIN_SAMPLES [--sleep_ms=N] [WORKER FLAGS...]
(the flags become the worker's options: --name=value, --name (True), --noname (False)).
Writes OUT_PREFIX.steps.jsonl (each step: epoch, index, epoch_steps, batch, live shards, rank),
OUT_PREFIX.params (the final parameters, raw fp32) and OUT_PREFIX.result.json (finish()'s dict
with the rank)."""

import json
import sys
import time

core_dir, out, train_samples = sys.argv[1], sys.argv[2], int(sys.argv[3])
sleep_ms = 0
options = {}
for arg in sys.argv[4:]:
    name, eq, value = arg[2:].partition("=")
    if name == "sleep_ms":
        sleep_ms = int(value)
    elif eq:
        options[name] = value
    elif name.startswith("no"):
        options[name[2:]] = False
    else:
        options[name] = True
sys.path.insert(0, core_dir)
import _core  # noqa: E402

worker = _core.Worker(options, [(n, s) for n, s in _core.synthetic_model(4096, 2)],
                      "known-gradients")
params = memoryview(worker.params).cast("B").cast("f")
grads = memoryview(worker.grads).cast("B").cast("f")
worker.join()
worker.begin_training(train_samples)
with open(out + ".steps.jsonl", "w") as steps:
    while True:
        step = worker.next_step()
        if step is None:
            break
        steps.write(json.dumps({"rank": worker.rank, "epoch": step.epoch, "index": step.index,
                                "epoch_steps": step.epoch_steps, "batch": step.batch,
                                "live": list(step.live_shards), "clock": step.clock}) + "\n")
        steps.flush()
        if sleep_ms:
            time.sleep(sleep_ms / 1000)
        _core.fill_known_gradient(worker.rank, step.clock, grads)
        worker.gradient_ready(0, worker.size)
        worker.submit(step.batch, 1.0)
result = worker.finish()
result["rank"] = worker.rank
with open(out + ".params", "wb") as f:
    f.write(bytes(memoryview(worker.params)))
with open(out + ".result.json", "w") as f:
    json.dump(result, f)

// The worker binary's flags, defined here for it alone (//worker:main_flags, which only the
// binary and the tests of its flags link); worker_flags.h declares them and reads them into
// WorkerOptions. The node flags (--scheduler, --bind, --auth, ...) are common/node_flags.cc's.
// Each flag that configures a session has an option of the same name and default in
// session_option_map.cc (tests/worker/session_option_map_test.cc checks them against these).
#include "gflags/gflags.h"
#include "worker/worker_flags.h"

DEFINE_string(model, "synthetic", "mlp, cnn, resnet20, or synthetic (no data; see --model_mb)");
DEFINE_string(data, "fashion-mnist", "fashion-mnist, mnist or cifar10");
DEFINE_string(data_dir, "", "directory of the data set's files (default for fashion-mnist: "
              "Debian's /usr/share/datasets/fashion-mnist)");
DEFINE_int32(rank, -1, "ask the scheduler for this rank at the job's start (-1: it chooses; the "
             "workers that ask for none take the ranks left in the order they register; a "
             "worker joining a running job takes the next rank; with --workers_per_process=N "
             "the threads ask for this rank and the N-1 after it)");
DEFINE_int32(batch_size, 64, "samples per step on this worker");
DEFINE_int32(epochs, 1, "passes over this worker's shard");
DEFINE_int64(max_steps, 0, "stop after this many steps (0: run all epochs)");
DEFINE_string(device, "cpu", "cpu (oneDNN) or cuda (cuDNN/cuBLAS; needs a build with "
              "--config=cuda)");
DEFINE_int32(gpu, 0, "CUDA device index for --device=cuda");
DEFINE_int32(threads, 0, "CPU backend threads (0: oneDNN's default, all cores)");
DEFINE_bool(augment, true, "cifar10: random crop and flip");
DEFINE_bool(lookahead, true, "r2sp: compute each gradient at the parameters the servers predict "
            "for when it will be applied (delay compensation; docs/MODES.md)");
DEFINE_double(compute_slowdown, 1.0, "EMULATION of a slower machine: stretch each compute phase "
              "to this many times its length by sleeping after it (1 = off)");
DEFINE_double(emulate_ms_per_sample, 0, "EMULATION of an accelerator: each compute phase lasts "
              "at least this many milliseconds per sample (sleeping after the real compute)");
DEFINE_string(metrics, "", "write per-iteration metrics here (JSON lines)");
DEFINE_string(timeline, "", "write a Chrome-trace timeline of compute/wait/push/pull here");
DEFINE_double(model_mb, 16, "synthetic model size in MB of fp32 parameters");
DEFINE_int32(layers, 8, "synthetic model: number of layers (weight + bias tensors each)");
DEFINE_int32(iterations, 100, "synthetic: iterations");
DEFINE_int32(workers_per_process, 1, "synthetic: run this many workers as threads of this "
             "process, each with its own connections, registration, rank and heartbeats (their "
             "--metrics, --timeline and --dump_params files get _tK before the extension); the "
             "process exits 3 if any of them is lost to the job");
DEFINE_string(grad, "random", "synthetic gradients: random or known (exactly checkable)");
DEFINE_int32(compute_ms, 0, "synthetic compute time per iteration, milliseconds");
DEFINE_string(init, "random", "initial parameters: random (from --seed), zero, or "
              "checkpoint:PATH (a model file, or a directory of them: the newest good one; "
              "worker 0 starts the job from its parameters)");
DEFINE_string(print_codec, "", "print this --push_codec value's canonical form and exit (status "
              "2, saying why, if the worker would refuse it): tools ask the worker rather than "
              "keep a copy of the grammar");
DEFINE_bool(eval_only, false, "evaluate --init=checkpoint:PATH on --data's test set and exit "
            "(no job: no scheduler or servers)");
DEFINE_string(model_dir, "", "real models, the evaluating worker: after each evaluation, write "
              "the model as evaluated (parameters, batch-norm statistics, accuracy) here");
DEFINE_int32(keep_models, 3, "--model_dir: keep the newest this many model files");
DEFINE_uint64(seed, 1, "seed for initial parameters, shuffling, dropout and random gradients");
DEFINE_string(push_codec, "fp32", "how gradients travel to the servers: fp32, fp16, "
              "topk:RATIO[,fp16][,exact] (the largest RATIO of the values) or "
              "csc:RATIO[,fp16][,chunk=N] (the RATIO of N-value chunks with the largest norms; "
              "N = 32768 by default)");
DEFINE_bool(encode_on_device, true, "--push_codec=fp16 on a GPU (--device=cuda): encode the "
            "gradients to fp16 on the GPU before copying them out, halving the bytes over the "
            "bus (false: copy fp32 and encode on the host)");
DEFINE_bool(error_feedback, true, "topk/csc: add what a push did not send to the next gradient");
DEFINE_double(momentum_correction, 0, "topk/csc: DGC momentum correction with this momentum "
              "(0 = off); run the servers with --momentum=0 then");
DEFINE_uint64(dense_below, 16384, "topk/csc: tensors of fewer values than this (biases, batch "
              "norm, a small classifier) go whole in every push besides the selection (csc: the "
              "chunks that hold them; 0 = none; docs/RESULTS.md#wire-codecs)");
DEFINE_double(density_warmup_epochs, 0, "topk/csc: start dense and lower the density "
              "geometrically to the codec's ratio over this many epochs (0 = off)");
DEFINE_string(pull_codec, "fp32", "how parameters travel back: fp32, fp16 (the weights "
              "rounded) or fp16_delta (binary16 differences to the worker's copy, the rounding "
              "error carried to the next pull; servers keep a copy per worker); the first and "
              "the final pull are always fp32");
DEFINE_bool(overlap, false, "push each partition while backward still runs, as soon as its "
            "gradient is complete, in buckets of --bucket_bytes (r2sp: asks for its slot before "
            "backward ends, from its predicted end, and pushes once granted)");
DEFINE_bool(overlap_pulls, true, "--overlap: also start the next forward while the pull "
            "runs, each layer waiting only for its own parameters (the CUDA backend uploads each "
            "layer's once its pull has landed)");
DEFINE_bool(early_pulls, false, "pull each partition as soon as its push is acknowledged, "
            "while the next partitions are still being pushed (with --overlap only in the "
            "Python client's CUDA models, whose backward reads its own copy of the parameters)");
DEFINE_int32(early_pulls_in_flight, 0, "--early_pulls with --overlap: at most this many pulls "
             "in flight until every push of the step is acknowledged, the first partitions "
             "first, then the rest (0: each partition's pull as its push is acknowledged)");
DEFINE_uint64(bucket_bytes, 4 << 20, "--overlap: push complete partitions once this many fp32 "
              "bytes of them are waiting (0: each partition at once)");
DEFINE_double(lr, 0.01, "easgd, eawild: the worker's local SGD learning rate (give it the "
              "servers' --lr; the other modes' optimizer runs on the servers)");
DEFINE_double(momentum, 0.9, "easgd, eawild: the local SGD's momentum (0 disables it)");
DEFINE_double(weight_decay, 0, "easgd, eawild: the local SGD's weight decay");
DEFINE_string(dump_params, "", "after training, write the final parameters (raw fp32) here");
DEFINE_int32(eval_every, 0, "real models: also evaluate the test set every this many steps "
             "(0: after each epoch only)");
DEFINE_int32(log_every, 0, "print progress every this many steps (0: 10 synthetic, 50 real)");
DEFINE_int32(request_timeout_s, 120, "give up on a push or pull after this time");

"""tests/docs/command_flags.py: which program each flag of a command line is given for."""

import unittest

import junit_main
from command_flags import command_flags, program_of


class ProgramOfTest(unittest.TestCase):
    def test_our_programs(self):
        self.assertEqual([program_of(w) for w in (
            "tools/launch", "./tools/bench/vs_ddp", "bazel-bin/worker/worker", "DIR/bin/server",
            "scheduler", "train_benchmark", "BIN/pushpull_benchmark",
            "examples/pytorch/fashion_mnist_cnn.py")],
            ["tools/launch", "tools/bench/vs_ddp", "worker", "server", "scheduler",
             "tools/bench/train_benchmark", "tools/bench/pushpull_benchmark", "examples/pytorch"])

    def test_other_programs(self):
        self.assertEqual([program_of(w) for w in ("bazel", "kubectl", "train.py", "worker1.r1")],
                         [None, None, None, None])


class CommandFlagsTest(unittest.TestCase):
    def test_a_tools_flags_and_its_flags_options(self):
        self.assertEqual(
            command_flags('tools/launch --servers=2 --server_flags="--lr=0.01 --momentum=0.9" '
                          '--worker_flags_for=3:--compute_slowdown=2 '
                          '--worker_cmd="/usr/bin/python3 train.py --epochs=2"'),
            [("tools/launch", "servers"), ("tools/launch", "server_flags"), ("server", "lr"),
             ("server", "momentum"), ("tools/launch", "worker_flags_for"),
             ("worker", "compute_slowdown"), ("tools/launch", "worker_cmd")])

    def test_net_and_variant_values(self):
        self.assertEqual(
            command_flags('python3 tools/compare_modes --net="--colocate" [--repeats=N] '
                          '--variant=early=--early_pulls'),
            [("tools/compare_modes", "net"), ("tools/netcluster", "colocate"),
             ("tools/compare_modes", "repeats"), ("tools/compare_modes", "variant"),
             ("worker", "early_pulls")])

    def test_scheduler_and_server_variant_values(self):
        self.assertEqual(
            command_flags("tools/compare_modes --scheduler_variant=w2=--r2sp_slot_width=2 "
                          "--server_variant=a1=--apply_threads=1"),
            [("tools/compare_modes", "scheduler_variant"), ("scheduler", "r2sp_slot_width"),
             ("tools/compare_modes", "server_variant"), ("server", "apply_threads")])

    def test_a_foreign_commands_flags_are_left_out(self):
        self.assertEqual(command_flags("bazel build -c opt --config=cuda //worker"), [])
        self.assertEqual(command_flags("kubectl apply --dry-run=client -f x.yaml"), [])

    def test_commands_split_at_operators(self):
        self.assertEqual(
            command_flags("R2SP_X=1 tools/package --variant=cuda && tools/launch --cluster=f | "
                          "tee log; worker --eval_only # --not_this"),
            [("tools/package", "variant"), ("tools/launch", "cluster"), ("worker", "eval_only")])

    def test_bazel_run_gives_the_flags_after_dashes_to_the_target(self):
        self.assertEqual(
            command_flags("bazel run -c opt //tools/bench:pushpull_benchmark -- --sizes_mb=1"),
            [("tools/bench/pushpull_benchmark", "sizes_mb")])

    def test_flags_without_a_command_are_unattributed(self):
        self.assertEqual(command_flags("--overlap --server_flags=--lr=0.1"),
                         [(None, "overlap"), (None, "server_flags"), ("server", "lr")])

    def test_unbalanced_quotes_fall_back_to_words(self):
        self.assertEqual(command_flags('tools/launch --worker_flags="--epochs=2'),
                         [("tools/launch", "worker_flags")])


if __name__ == "__main__":
    junit_main.main()

"""tools/pylib/analysis/script_flags.py: the settings a ddp run takes from the job's worker and
server flags, per-worker pacing, and the script's command lines through r2sp and under DDP."""

import unittest

import junit_main
from pylib.analysis import script_flags


class SettingsTest(unittest.TestCase):
    def test_the_settings_in_a_fixed_order_the_last_value_winning(self):
        self.assertEqual(
            script_flags.settings("--model=cnn --epochs 2 --batch_size=64 --threads=1 "
                                  "--epochs=3 --emulate_ms_per_sample=4",
                                  script_flags.WORKER_SETTINGS),
            ["--batch_size=64", "--epochs=3", "--emulate_ms_per_sample=4"])
        self.assertEqual(script_flags.settings("", script_flags.WORKER_SETTINGS), [])

    def test_a_flag_string_that_does_not_split_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"^cannot split the flags '--seed=\"1': "):
            script_flags.settings('--seed="1', script_flags.WORKER_SETTINGS)


class DdpFlagsTest(unittest.TestCase):
    def test_worker_settings_then_the_servers_sgd(self):
        self.assertEqual(
            script_flags.ddp_flags("--batch_size=32 --data_dir='/d a' --max_steps=9 --seed=4 "
                                   "--push_codec=fp16", "--lr=0.05 --momentum=0.8 --apply_threads=2"),
            "--batch_size=32 --seed=4 --max_steps=9 '--data_dir=/d a' --lr=0.05 --momentum=0.8")

    def test_per_worker_pacing_is_kept_and_the_rest_dropped(self):
        self.assertEqual(script_flags.ddp_flags_for(["3:--emulate_ms_per_sample=8 --threads=1",
                                                     "1:--compute_slowdown=2",
                                                     "0:--batch_size=16"]),
                         ["3:--emulate_ms_per_sample=8", "0:--batch_size=16"])


class ScriptCommandTest(unittest.TestCase):
    def test_through_r2sp_and_under_ddp(self):
        self.assertEqual(script_flags.script_command("/usr/bin/python3", "ex/t.py", "--threads=1"),
                         "/usr/bin/python3 ex/t.py --threads=1")
        self.assertEqual(script_flags.script_command("py", "a b.py", "", ddp_hook="none"),
                         "py 'a b.py' --backend=ddp --ddp_comm_hook=none")
        self.assertEqual(script_flags.script_command("py", "t.py", "--x=1", ddp_hook="fp16"),
                         "py t.py --x=1 --backend=ddp --ddp_comm_hook=fp16")
        self.assertEqual(script_flags.script_command("py", "t.py", "", ddp_hook="none",
                                                     data_order="r2sp"),
                         "py t.py --backend=ddp --ddp_comm_hook=none --data_order=r2sp")
        self.assertEqual(script_flags.script_command("py", "t.py", "", data_order="r2sp"),
                         "py t.py")  # through R2SP the job's sampler decides


if __name__ == "__main__":
    junit_main.main()

"""tools/pylib/analysis/ddp_study.py: the study's settings as compare_modes arguments (full and
--quick-sized), their shell lines, and what each setting's runs say against its threshold."""

import shlex
import unittest

import junit_main
from pylib.analysis import ddp_study


def fig(samples=None, job=None, time=None, accuracy=None):
    return {"samples_per_s": samples, "job_samples_per_s": job, "time_to_target_s": time,
            "final_accuracy": accuracy}


class SettingsTest(unittest.TestCase):
    def test_names_in_order(self):
        self.assertEqual([s.name for s in ddp_study.settings(ddp_study.Options())],
                         ["hetero", "links_1gbit", "links_419mbit", "servers_1", "servers_2",
                          "servers_4", "straggler"])

    def test_every_setting_runs_the_script_with_the_same_settings(self):
        for s in ddp_study.settings(ddp_study.Options(data_dir="/d")):
            with self.subTest(setting=s.name):
                self.assertIn("--script=examples/pytorch/fashion_mnist_cnn.py", s.argv)
                self.assertIn("--repeats=3", s.argv)
                self.assertIn("--server_flags=--lr=0.01 --momentum=0.9", s.argv)
                flags = next(a for a in s.argv if a.startswith("--worker_flags="))
                self.assertTrue(flags.startswith("--worker_flags=--batch_size=64 --epochs=3 "
                                                 "--data_dir=/d"), flags)
                self.assertTrue(any("ddp" in a for a in s.argv if a.startswith("--modes=")))

    def test_each_settings_own_arguments(self):
        by_name = {s.name: s.argv for s in ddp_study.settings(ddp_study.Options())}
        self.assertEqual(by_name["hetero"][-4:], [
            "--servers=1", "--modes=bsp,r2sp_hetero,ddp", "--global_batch=256",
            "--net=--cpu_quota=0:0.4 --cpu_quota=1:0.4 --cpu_quota=2:0.4 --cpu_quota=3:0.2"])
        self.assertEqual(by_name["links_419mbit"][-4:], [
            "--servers=4", "--modes=bsp,r2sp,r2sp+fp16@overlap,r2sp_auto+fp16@overlap,"
            "bsp+fp16@overlap,ddp,ddp+fp16",
            "--variant=overlap=--overlap", "--net=--colocate --worker_link=419mbit"])
        self.assertIn("--worker_flags=--batch_size=64 --epochs=3 --emulate_ms_per_sample=4",
                      by_name["links_1gbit"])
        self.assertEqual(by_name["servers_2"][-4:], [
            "--servers=2", "--modes=r2sp,r2sp+fp16@overlap,ddp", "--variant=overlap=--overlap",
            "--net=--server_link=419mbit --worker_link=1gbit"])
        self.assertEqual(by_name["straggler"][-3:], [
            "--servers=1", "--modes=ssp,asp,ddp", "--worker_flags_for=3:--emulate_ms_per_sample=8"])

    def test_quick_sized(self):
        o = ddp_study.Options(repeats=1, epochs=1, max_steps=20, target_accuracy=0.3,
                              link_rates=("419mbit",), server_counts=(1,), bin_dir="/b")
        hetero = ddp_study.settings(o)[0]
        self.assertIn("--worker_flags=--batch_size=64 --epochs=1 --max_steps=20", hetero.argv)
        self.assertIn("--bin_dir=/b", hetero.argv)
        self.assertEqual([s.name for s in ddp_study.settings(o)],
                         ["hetero", "links_419mbit", "servers_1", "straggler"])

    def test_time_dilation_slows_pace_and_links_alike_but_not_real_compute(self):
        o = ddp_study.Options(time_dilation=5, link_rates=("419mbit",), server_counts=(2,))
        by_name = {s.name: s for s in ddp_study.settings(o)}
        self.assertEqual(by_name["hetero"].argv, ddp_study.settings(ddp_study.Options())[0].argv)
        links = by_name["links_419mbit"]
        self.assertEqual(links.title, "2. Equal machines, colocated servers, every link 419mbit, "
                                      "time dilated 5x")
        self.assertIn("--worker_flags=--batch_size=64 --epochs=3 --emulate_ms_per_sample=20",
                      links.argv)
        self.assertEqual(links.argv[-1],
                         "--net=--colocate --worker_link=419mbit --time_dilation=5")
        self.assertEqual(by_name["servers_2"].argv[-1], "--net=--server_link=419mbit "
                                                        "--worker_link=1gbit --time_dilation=5")
        self.assertEqual(by_name["straggler"].argv[-1],
                         "--worker_flags_for=3:--emulate_ms_per_sample=40")
        self.assertIn("--worker_flags=--batch_size=64 --epochs=3 --emulate_ms_per_sample=20",
                      by_name["straggler"].argv)

    def test_command_line_is_a_shell_line(self):
        s = ddp_study.settings(ddp_study.Options())[0]
        line = ddp_study.command_line(s, "results/vs_ddp")
        self.assertEqual(shlex.split(line),
                         ["tools/compare_modes", "--out=results/vs_ddp/hetero"] + s.argv)


class CheckTest(unittest.TestCase):
    def test_hetero(self):
        runs = [{"bsp": fig(), "r2sp_hetero": fig(job=300, time=50, accuracy=0.885),
                 "ddp": fig(job=180, time=80, accuracy=0.882)},
                {"bsp": fig(), "r2sp_hetero": fig(job=320, time=40, accuracy=0.886),
                 "ddp": fig(job=200, time=70, accuracy=0.884)}]
        lines, items = ddp_study.check_lines("hetero", runs)
        self.assertEqual(lines, ["r2sp_hetero / ddp: job samples/s 1.63, time to target 1.68 "
                                 "(ddp's time over r2sp_hetero's), accuracy gap +0.25 points; "
                                 "check (>= 1.5, >= 1.5, within 0.5): met"])
        self.assertEqual(items, ["hetero_vs_ddp_job=1.63", "hetero_vs_ddp_time=1.68"])
        runs[0]["r2sp_hetero"]["time_to_target_s"] = None
        runs[1]["r2sp_hetero"]["time_to_target_s"] = None
        self.assertTrue(ddp_study.check_lines("hetero", runs)[0][0].endswith("not met"))

    def test_links_compare_the_best_of_each(self):
        runs = [{"bsp": fig(100, time=90), "r2sp": fig(150, time=60),
                 "ddp": fig(120, time=50), "ddp+fp16": fig(140, time=70)}]
        lines, items = ddp_study.check_lines("links_1gbit", runs)
        self.assertEqual(lines, [
            "samples/s: best R2SP r2sp, best DDP ddp+fp16, ratio 1.07; check >= 1.0: met",
            "time to target: best R2SP r2sp, best DDP ddp, ratio 0.83; check >= 1.0: not met"])
        self.assertEqual(items, ["links_1gbit_best_r2sp_vs_best_ddp_samples=1.07",
                                 "links_1gbit_best_r2sp_vs_best_ddp_time=0.83"])

    def test_servers_and_where_r2sp_matches(self):
        runs = [{"r2sp": fig(90), "r2sp+fp16@overlap": fig(95), "ddp": fig(100)},
                {"r2sp": fig(80), "r2sp+fp16@overlap": fig(110), "ddp": fig(100)},
                {"r2sp": fig(85), "r2sp+fp16@overlap": fig(70), "ddp": fig(100)}]
        lines, items = ddp_study.check_lines("servers_2", runs)
        self.assertEqual(lines, ["best R2SP (r2sp+fp16@overlap) / ddp samples/s 0.950 with 2 "
                                 "servers (below DDP)"])
        self.assertEqual(items, ["servers_2_r2sp_vs_ddp=0.950"])
        # Just below DDP reads as below, not as 1.00.
        close = [{"r2sp": fig(199), "ddp": fig(200)}]
        self.assertEqual(ddp_study.check_lines("servers_1", close)[0],
                         ["best R2SP (r2sp) / ddp samples/s 0.995 with 1 servers (below DDP)"])
        self.assertEqual(ddp_study.best_r2sp_vs_ddp(runs), ("r2sp+fp16@overlap", 0.95))
        self.assertEqual(ddp_study.servers_to_match({1: 0.7, 2: 1.02, 4: 1.3}), 2)
        self.assertIsNone(ddp_study.servers_to_match({1: 0.7, 2: None}))

    def test_straggler(self):
        runs = [{"ssp": fig(job=150, time=40), "asp": fig(job=180), "ddp": fig(job=100, time=60)}]
        lines, items = ddp_study.check_lines("straggler", runs)
        self.assertEqual(lines, ["ssp / ddp: job samples/s 1.50, time to target 1.50",
                                 "asp / ddp: job samples/s 1.80, time to target n/a"])
        self.assertEqual(items, ["straggler_ssp_vs_ddp_job=1.50", "straggler_asp_vs_ddp_job=1.80"])


if __name__ == "__main__":
    junit_main.main()

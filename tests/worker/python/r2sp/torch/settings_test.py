"""r2sp.torch.settings: the worker's flags from the launchers' environment, torchrun's
variables (RANK the rank the worker asks for), the script's flags and keyword settings, and the
errors for bad ones."""

import unittest

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    from r2sp.torch import settings  # noqa: E402


@unittest.skipIf(SKIP, SKIP or "")
class ResolveTest(unittest.TestCase):
    def test_launcher_environment_then_flags_then_settings_later_values_win(self):
        env = {"R2SP_SCHEDULER": "tcp://10.0.0.1:9000",
               "R2SP_WORKER_FLAGS": "--batch_size=64 --epochs=2 --metrics='/run dir/w0.jsonl' "
                                    "--model=cnn --data=fashion-mnist --threads=1 --seed=7",
               "LOCAL_RANK": "3", "R2SP_DATA_DIR": "/data/fm"}
        s = settings.resolve(env, ["--epochs=3", "--push_codec=fp16"],
                             {"batch_size": 32, "overlap": True, "lookahead": False})
        self.assertEqual(s.flags, ("--scheduler=tcp://10.0.0.1:9000",
                                   "--metrics=/run dir/w0.jsonl", "--seed=7", "--epochs=3",
                                   "--push_codec=fp16", "--batch_size=32", "--overlap",
                                   "--nolookahead"))
        self.assertEqual((s.local_rank, s.seed, s.data_dir), (3, 7, "/data/fm"))
        self.assertEqual(s.options, {"scheduler": "tcp://10.0.0.1:9000",
                                     "metrics": "/run dir/w0.jsonl", "seed": "7", "epochs": "3",
                                     "push_codec": "fp16", "batch_size": 32, "overlap": True,
                                     "lookahead": False})
        self.assertEqual(s.flag("epochs"), "3")
        self.assertEqual(s.flag("overlap"), "true")
        self.assertIsNone(s.flag("model"))

    def test_a_negated_flag_replaces_the_flag_it_negates_and_the_other_way_round(self):
        env = {"R2SP_SCHEDULER": "tcp://h:1", "R2SP_WORKER_FLAGS": "--overlap --lookahead=true"}
        s = settings.resolve(env, ["--nooverlap", "--nolookahead", "--lookahead"])
        self.assertEqual(s.flags, ("--scheduler=tcp://h:1", "--nooverlap", "--lookahead"))
        self.assertEqual(s.options, {"scheduler": "tcp://h:1", "overlap": False,
                                     "lookahead": True})

    def test_torchrun_variables_give_the_scheduler(self):
        s = settings.resolve({"MASTER_ADDR": "node1", "MASTER_PORT": "29500", "RANK": "1",
                              "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
        self.assertEqual(s.flags, ("--scheduler=tcp://node1:29500", "--rank=1"))
        self.assertEqual(s.options, {"scheduler": "tcp://node1:29500", "rank": 1})
        self.assertEqual((s.local_rank, s.seed, s.data_dir), (1, 1, ""))
        self.assertEqual((s.rank, s.world_size), (1, 2))

    def test_without_rank_and_world_size_the_scheduler_chooses(self):
        s = settings.resolve({"R2SP_SCHEDULER": "tcp://h:1", "RANK": "", "WORLD_SIZE": ""})
        self.assertEqual((s.flags, s.rank, s.world_size), (("--scheduler=tcp://h:1",), None, None))
        s = settings.resolve({"R2SP_SCHEDULER": "tcp://h:1", "WORLD_SIZE": "4"})
        self.assertEqual((s.flags, s.rank, s.world_size), (("--scheduler=tcp://h:1",), None, 4))

    def test_a_rank_flag_or_setting_replaces_rank(self):
        env = {"R2SP_SCHEDULER": "tcp://h:1", "RANK": "0", "WORLD_SIZE": "3",
               "R2SP_WORKER_FLAGS": "--rank=1"}
        s = settings.resolve(env)
        self.assertEqual((s.flags, s.options["rank"], s.rank), (("--scheduler=tcp://h:1",
                                                                  "--rank=1"), "1", 1))
        s = settings.resolve(env, settings={"rank": 2})
        self.assertEqual((s.flags, s.options["rank"], s.rank), (("--scheduler=tcp://h:1",
                                                                  "--rank=2"), 2, 2))
        s = settings.resolve(env, ["--rank=-1"])  # the scheduler chooses
        self.assertEqual((s.options["rank"], s.rank, s.world_size), ("-1", None, 3))
        s = settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"}, ["--rank=5"])  # no WORLD_SIZE
        self.assertEqual((s.rank, s.world_size), (5, None))

    def test_bad_rank_and_world_size_name_the_variable(self):
        sched = {"R2SP_SCHEDULER": "tcp://h:1"}
        cases = [({"RANK": "one"}, None, "r2sp.torch.init: RANK='one' is not an integer"),
                 ({"RANK": "1.0", "WORLD_SIZE": "2"}, None,
                  "r2sp.torch.init: RANK='1.0' is not an integer"),
                 ({"WORLD_SIZE": "two"}, None,
                  "r2sp.torch.init: WORLD_SIZE='two' is not an integer"),
                 ({"RANK": "-1"}, None, "r2sp.torch.init: RANK=-1 is negative; RANK is this "
                  "worker's index in the job, from 0"),
                 ({"WORLD_SIZE": "0"}, None, "r2sp.torch.init: WORLD_SIZE=0 is not a number of "
                  "workers (1 or more)"),
                 ({"RANK": "2", "WORLD_SIZE": "2"}, None, "r2sp.torch.init: RANK=2 is not below "
                  "WORLD_SIZE=2 (the ranks are 0 to 1)"),
                 ({}, ["--rank=abc"], "r2sp.torch.init: --rank='abc' is not an integer"),
                 ({}, ["--rank"], "r2sp.torch.init: --rank=True is not an integer"),
                 ({}, ["--rank=-2"], "r2sp.torch.init: --rank=-2 is not a rank (-1: the "
                  "scheduler chooses)"),
                 ({"RANK": "0", "WORLD_SIZE": "2"}, ["--rank=2"], "r2sp.torch.init: --rank=2 is "
                  "not below WORLD_SIZE=2 (the ranks are 0 to 1)")]
        for env, flags, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(ValueError) as e:
                    settings.resolve(dict(sched, **env), flags)
                self.assertEqual(str(e.exception), message)

    def test_r2sp_scheduler_wins_over_master_addr_and_a_setting_over_both(self):
        env = {"R2SP_SCHEDULER": "tcp://a:1", "MASTER_ADDR": "b", "MASTER_PORT": "2"}
        self.assertEqual(settings.resolve(env).flags, ("--scheduler=tcp://a:1",))
        self.assertEqual(settings.resolve(env, settings={"scheduler": "tcp://c:3"}).flags,
                         ("--scheduler=tcp://c:3",))

    def test_data_dir_flag_wins_over_the_variable_and_is_not_a_worker_flag(self):
        s = settings.resolve({"R2SP_DATA_DIR": "/a"}, ["--data_dir=/b", "--scheduler=tcp://h:1"])
        self.assertEqual((s.data_dir, s.flags), ("/b", ("--scheduler=tcp://h:1",)))

    def test_no_scheduler_address_says_what_to_set(self):
        with self.assertRaises(ValueError) as e:
            settings.resolve({"R2SP_WORKER_FLAGS": "--epochs=1"})
        self.assertEqual(str(e.exception),
                         "r2sp.torch.init: no scheduler address; set "
                         "R2SP_SCHEDULER=tcp://HOST:PORT (tools/launch does), or MASTER_ADDR "
                         "and MASTER_PORT (torchrun's), or call "
                         "r2sp.torch.init(scheduler='tcp://HOST:PORT')")

    def test_master_addr_without_port(self):
        with self.assertRaises(ValueError) as e:
            settings.resolve({"MASTER_ADDR": "node1"})
        self.assertTrue(str(e.exception).startswith(
            "r2sp.torch.init: MASTER_PORT is not set (torchrun sets MASTER_ADDR and MASTER_PORT "
            "together); set R2SP_SCHEDULER"), str(e.exception))

    def test_bad_port_local_rank_and_seed(self):
        cases = [({"MASTER_ADDR": "h", "MASTER_PORT": "x1"}, None,
                  "r2sp.torch.init: MASTER_PORT='x1' is not a port number"),
                 ({"R2SP_SCHEDULER": "tcp://h:1", "LOCAL_RANK": "one"}, None,
                  "r2sp.torch.init: LOCAL_RANK='one' is not an integer"),
                 ({"R2SP_SCHEDULER": "tcp://h:1"}, ["--seed=abc"],
                  "r2sp.torch.init: --seed='abc' is not an integer")]
        for env, flags, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(ValueError) as e:
                    settings.resolve(env, flags)
                self.assertEqual(str(e.exception), message)

    def test_unparsable_worker_flags_variable(self):
        with self.assertRaises(ValueError) as e:
            settings.resolve({"R2SP_SCHEDULER": "tcp://h:1", "R2SP_WORKER_FLAGS": "--a='b"})
        self.assertEqual(str(e.exception), "r2sp.torch.init: R2SP_WORKER_FLAGS cannot be parsed "
                                           "(No closing quotation): \"--a='b\"")

    def test_malformed_flags_and_settings(self):
        env = {"R2SP_SCHEDULER": "tcp://h:1"}
        cases = [(ValueError, ["epochs=2"], {},
                  "r2sp.torch.init: flags holds 'epochs=2', not a flag; flags are written "
                  "'--name=value' or '--name'"),
                 (TypeError, [3], {},
                  "r2sp.torch.init: flags holds 3 of type int; flags are strings such as "
                  "'--batch_size=64'"),
                 (TypeError, "--epochs=2", {},
                  "r2sp.torch.init: flags is a list of strings such as ['--epochs=2'], not str"),
                 (TypeError, None, {"epochs": [1]},
                  "r2sp.torch.init: setting epochs=[1] is a list; settings are numbers, "
                  "strings or booleans")]
        for error, flags, kwargs, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(error) as e:
                    settings.resolve(env, flags, kwargs)
                self.assertEqual(str(e.exception), message)


if __name__ == "__main__":
    junit_main.main()

"""tools/pylib/analysis/step_schedule.py: the models' tensors (against torchvision's and the
examples' own where Debian's torch is here), their modules and ranges, the even split of a step,
and Pace's deadlines on a clock the test drives."""

import json
import os
import subprocess
import unittest

import junit_main
from pylib.analysis import step_schedule
from pylib.analysis.step_schedule import Module

TORCH_PYTHON = "/usr/bin/python3"
SHAPES = "print(json.dumps([[n, list(p.shape)] for n, p in m.named_parameters()]))"
TORCHVISION_SHAPES = "import json, torchvision; m = torchvision.models.resnet18(num_classes=10); "
EXAMPLE_CNN_SHAPES = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
                      "from fashion_mnist_cnn import Cnn; m = Cnn(); ")
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.realpath(__file__)))))), "examples", "pytorch")


def total(tensors):
    return sum(count for _, _, count in step_schedule.layout_of(tensors))


def torchvision_here():
    if not os.path.exists(TORCH_PYTHON):
        return False
    return subprocess.run([TORCH_PYTHON, "-c", "import torchvision"],
                          capture_output=True).returncode == 0


class ModelsTest(unittest.TestCase):
    def test_the_cnn_has_the_built_in_cnns_parameters(self):
        tensors = step_schedule.cnn_tensors()
        self.assertEqual((len(tensors), total(tensors)), (8, 3274634))
        self.assertEqual(tensors[4], ("fc1.weight", [1024, 3136]))

    def test_resnet18_has_torchvisions_count(self):
        tensors = step_schedule.resnet18_tensors()
        self.assertEqual((len(tensors), total(tensors)), (62, 11181642))
        self.assertEqual((tensors[0], tensors[-1]),
                         (("conv1.weight", [64, 3, 7, 7]), ("fc.bias", [10])))
        self.assertIn(("layer2.0.downsample.0.weight", [128, 64, 1, 1]), tensors)

    @unittest.skipUnless(torchvision_here(), "no torchvision at /usr/bin/python3")
    def test_resnet18_is_torchvisions_name_for_name_in_order(self):
        out = subprocess.run([TORCH_PYTHON, "-c", TORCHVISION_SHAPES + SHAPES],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual([tuple(t) for t in json.loads(out)],
                         [(n, s) for n, s in step_schedule.resnet18_tensors()])

    @unittest.skipUnless(torchvision_here(), "no torch at /usr/bin/python3")
    def test_the_cnn_is_the_examples_name_for_name_in_order(self):
        out = subprocess.run([TORCH_PYTHON, "-c", EXAMPLE_CNN_SHAPES + SHAPES, EXAMPLES],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual([tuple(t) for t in json.loads(out)],
                         [(n, s) for n, s in step_schedule.cnn_tensors()])


class ModulesTest(unittest.TestCase):
    def test_tensors_group_into_their_modules_with_adjacent_ranges_merged(self):
        layout = [("a.weight", 0, 4), ("a.bias", 4, 2), ("b.weight", 8, 3), ("b.bias", 16, 1),
                  ("c.0.weight", 17, 5)]
        self.assertEqual(step_schedule.modules(layout),
                         [Module("a", ((0, 6),)), Module("b", ((8, 3), (16, 1))),
                          Module("c.0", ((17, 5),))])

    def test_resnet18_has_41_modules_in_forward_order(self):
        mods = step_schedule.modules(step_schedule.layout_of(step_schedule.resnet18_tensors()))
        self.assertEqual(len(mods), 41)
        self.assertEqual([m.name for m in mods[:4]] + [mods[-1].name],
                         ["conv1", "bn1", "layer1.0.conv1", "layer1.0.bn1", "fc"])
        self.assertEqual(mods[-1].ranges, ((11181642 - 5130, 5130),))

    def test_a_step_is_split_evenly(self):
        s = step_schedule.shares(4, 12.0, 0.25)
        self.assertAlmostEqual(s.forward_s, 0.00075, places=12)
        self.assertAlmostEqual(s.backward_s, 0.00225, places=12)

    def test_a_step_without_modules_or_time_or_with_a_bad_share_is_refused(self):
        for args in ((0, 8.5, 0.3), (4, 0.0, 0.3), (4, 8.5, 1.0), (4, 8.5, 0.0)):
            with self.assertRaisesRegex(ValueError, "a step needs modules"):
                step_schedule.shares(*args)


class LateClock:
    """Seconds that pass when the pace sleeps, each sleep `late` longer than asked."""

    def __init__(self, late):
        self.now, self.late, self.sleeps = 0.0, late, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(round(seconds, 9))
        self.now += seconds + self.late


class PaceTest(unittest.TestCase):
    def pace(self, late):
        clock = LateClock(late)
        return step_schedule.Pace(clock=clock, sleep=clock.sleep), clock

    def test_oversleeps_are_taken_back_and_wakes_come_earlier(self):
        pace, clock = self.pace(late=0.0001)
        pace.spend(0.001)
        pace.spend(0.001)
        self.assertEqual(clock.sleeps, [0.001, 0.00088])
        self.assertAlmostEqual(pace.early, 0.000036, places=12)
        self.assertAlmostEqual(clock.now, 0.00208, places=12)

    def test_a_blocking_wait_moves_the_deadline_and_a_short_one_does_not(self):
        pace, clock = self.pace(late=0.0)
        pace.spend(0.001)
        pace.waited(0.001, 0.00102)  # found its data: 20 us
        clock.now = 0.00102
        pace.spend(0.001)
        self.assertEqual(clock.sleeps, [0.001, 0.00098])
        pace.waited(0.002, 0.005)
        clock.now = 0.005
        pace.spend(0.001)
        self.assertEqual(clock.sleeps[-1], 0.001)
        self.assertAlmostEqual(clock.now, 0.006, places=12)

    def test_restart_starts_the_next_step_from_now(self):
        pace, clock = self.pace(late=0.0)
        pace.spend(0.001)
        clock.now = 0.010
        pace.restart()
        pace.spend(0.002)
        self.assertEqual(clock.sleeps, [0.001, 0.002])
        self.assertAlmostEqual(clock.now, 0.012, places=12)

    def test_a_deadline_already_past_sleeps_not(self):
        pace, clock = self.pace(late=0.0)
        pace.spend(0.001)
        clock.now = 0.0015  # 0.5 ms late, not a wait: taken back from the next share
        pace.spend(0.0004)
        self.assertEqual(clock.sleeps, [0.001])


if __name__ == "__main__":
    junit_main.main()

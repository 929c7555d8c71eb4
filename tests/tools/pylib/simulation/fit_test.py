"""tools/pylib/simulation/fit.py: the grid point with the smallest largest error wins."""

import unittest

from pylib.simulation import fit, validation
import junit_main


class FitTest(unittest.TestCase):
    def test_picks_the_better_point(self):
        entries = [e for e in validation.load() if e["name"].startswith("study1_419")]
        good, bad = (0.84, 0.03, 0.001), (0.5, 0.03, 0.001)
        cal, err = fit.fit(entries, grid=[bad, good])
        self.assertEqual((cal.link_efficiency, cal.op_overhead_s, cal.control_s), good)
        self.assertLess(err, 0.10)
        self.assertAlmostEqual(err, fit.worst_error(cal, entries))

    def test_nothing_to_fit(self):
        entries = [dict(e, matched=False) for e in validation.load()[:1]]
        with self.assertRaisesRegex(ValueError, "nothing to fit"):
            fit.fit(entries)


if __name__ == "__main__":
    junit_main.main()

"""tools/pylib/simulation/codecs.py: byte ratios against fp32, and bad codecs refused."""

import unittest

from pylib.simulation import codecs
import junit_main


class ByteRatioTest(unittest.TestCase):
    def test_ratios(self):
        self.assertEqual(codecs.byte_ratio("fp32"), 1.0)
        self.assertEqual(codecs.byte_ratio("fp16"), 0.5)
        self.assertEqual(codecs.byte_ratio("topk:0.01"), 0.02)

    def test_bad_codecs(self):
        for bad in ("fp8", "topk:0", "topk:2", "topk:x"):
            with self.assertRaisesRegex(ValueError, "use fp32, fp16 or topk:K"):
                codecs.byte_ratio(bad)


if __name__ == "__main__":
    junit_main.main()

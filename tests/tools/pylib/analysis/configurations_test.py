"""tools/pylib/configurations.py: codec names checked as the worker checks them, lists of
modes and codecs, variants, and how RESULT keys spell configurations."""

import unittest

from pylib.analysis import configurations as cfg
import junit_main


class ParseCodecTest(unittest.TestCase):
    """parse_codec accepts what the worker's ParseCodecSpec (common/codec/codec_spec.cc) does."""

    def test_accepted(self):
        for text, parsed in [
                ("fp32", "fp32"), ("FP16", "fp16"), (" fp16 ", "fp16"),
                ("topk:0.01", "topk:0.01"), ("TopK:0.01,FP16,Exact", "topk:0.01,fp16,exact"),
                ("topk:1", "topk:1"), ("topk:1e-2", "topk:1e-2"), ("topk:.5", "topk:.5"),
                ("topk:1.", "topk:1."),
                ("topk:+0.25", "topk:+0.25"), ("topk: 0.25 ,fp16", "topk:0.25,fp16"),
                ("topk:0x.8", "topk:0x.8"), ("topk:0X1p-1", "topk:0x1p-1"),
                ("topk:0.01,exact,fp16,fp16", "topk:0.01,exact,fp16,fp16"),
                ("csc:0.05", "csc:0.05"), ("csc:0.05,chunk=4096", "csc:0.05,chunk=4096"),
                ("csc:1,fp16,chunk=1", "csc:1,fp16,chunk=1"),
                ("csc:0.05,chunk=4194304", "csc:0.05,chunk=4194304"),
                ("csc:0.05,chunk= 16 ", "csc:0.05,chunk=16")]:
            with self.subTest(text=text):
                self.assertEqual(cfg.parse_codec(text), parsed)

    def test_refused(self):
        for text, why in [
                ("", "unknown codec"), ("fp8", "unknown codec"), ("topk", "unknown codec"),
                ("topk0.01", "unknown codec"), ("dgc:0.01", "unknown codec"),
                ("topk:", "ratio"), ("topk:0", "ratio"), ("topk:1.5", "ratio"),
                ("topk:-0.1", "ratio"), ("topk:nan", "ratio"), ("topk:inf", "ratio"),
                ("topk:0.0_1", "ratio"), ("topk:0x", "ratio"), ("topk:0x2", "ratio"),
                ("topk:1e", "ratio"), ("topk:-0", "ratio"), ("topk:1e-400", "ratio"),
                ("topk:0.01,", "unknown option ''"), ("topk:0.01, fp16", "unknown option ' fp16'"),
                ("topk:0.01,chunk=8", "unknown option"), ("topk:0.01,fp32", "unknown option"),
                ("csc:0.05,exact", "unknown option 'exact'"), ("csc:0.05,chunk=0", "chunk"),
                ("csc:0.05,chunk=4194305", "chunk"), ("csc:0.05,chunk=-1", "chunk"),
                ("csc:0.05,chunk=1.5", "chunk"), ("csc:0.05,chunk=", "chunk"),
                ("csc:0.05,chunk=0x10", "chunk")]:
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, why):
                    cfg.parse_codec(text)


class ModeListsTest(unittest.TestCase):
    def test_modes_keep_a_sparse_codecs_options(self):
        self.assertEqual(cfg.split_modes("bsp,r2sp+topk:0.01,fp16,exact,asp"),
                         ["bsp", "r2sp+topk:0.01,fp16,exact", "asp"])
        self.assertEqual(cfg.split_modes("r2sp+csc:0.05,chunk=4096,bsp+fp16"),
                         ["r2sp+csc:0.05,chunk=4096", "bsp+fp16"])
        self.assertEqual(cfg.split_modes("bsp"), ["bsp"])

    def test_semicolons_separate_modes(self):
        self.assertEqual(cfg.split_modes("bsp;r2sp+topk:0.01,fp16"), ["bsp", "r2sp+topk:0.01,fp16"])

    def test_codecs_are_spelt_as_the_worker_gets_them(self):
        self.assertEqual(cfg.split_modes("bsp+FP16,r2sp+TopK: 0.01,Exact,asp+"),
                         ["bsp+fp16", "r2sp+topk:0.01,exact", "asp"])

    def test_an_option_after_no_sparse_codec_is_an_unknown_mode(self):
        for text in ("bsp,fp16", "r2sp+fp16,fp16", "fp16,bsp", "bsp,fast"):
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, "unknown mode"):
                    cfg.split_modes(text)

    def test_a_bad_codec_in_a_mode(self):
        with self.assertRaisesRegex(ValueError, "unknown option 'exact'"):
            cfg.split_modes("bsp,r2sp+csc:0.05,exact")

    def test_codecs(self):
        self.assertEqual(cfg.split_codecs("fp32,fp16,topk:0.01"), ["fp32", "fp16", "topk:0.01"])
        self.assertEqual(cfg.split_codecs("topk:0.01,exact,csc:0.05,chunk=4096"),
                         ["topk:0.01,exact", "csc:0.05,chunk=4096"])
        self.assertEqual(cfg.split_codecs("fp16,CSC:0.05"), ["fp16", "csc:0.05"])
        self.assertEqual(cfg.split_codecs("topk:0.01,fp16;fp16;fp32"),
                         ["topk:0.01,fp16", "fp16", "fp32"])

    def test_fp16_after_a_sparse_codec_is_ambiguous(self):
        with self.assertRaisesRegex(ValueError, "Separate the codecs with ';'"):
            cfg.split_codecs("fp32,topk:0.01,fp16")

    def test_unknown_codec(self):
        with self.assertRaisesRegex(ValueError, "unknown codec 'int8'"):
            cfg.split_codecs("fp32,int8")
        with self.assertRaisesRegex(ValueError, "unknown codec 'exact'"):
            cfg.split_codecs("fp16,exact")

    def test_every_mode_with_every_codec_mode_by_mode(self):
        self.assertEqual(cfg.mode_codec_names(["bsp", "r2sp"], ["fp32", "fp16", "topk:0.01"]),
                         ["bsp", "bsp+fp16", "bsp+topk:0.01", "r2sp", "r2sp+fp16",
                          "r2sp+topk:0.01"])

    def test_result_key(self):
        self.assertEqual(cfg.result_key("r2sp_hetero+fp16"), "r2sp_hetero+fp16")
        self.assertEqual(cfg.result_key("r2sp+topk:0.01"), "r2sp+topk_0.01")
        self.assertEqual(cfg.result_key("bsp+csc:0.05,fp16,chunk=4096"),
                         "bsp+csc_0.05_fp16_chunk_4096")



if __name__ == "__main__":
    junit_main.main()

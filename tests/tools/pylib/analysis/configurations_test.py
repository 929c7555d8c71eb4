"""tools/pylib/analysis/configurations.py and codec_spec.py: codec names asked of the worker
(a stand-in binary answering --print_codec from a table, as the real one answers from
common/codec/codec_spec.cc, whose own tests cover the grammar), lists of modes and codecs,
variants, and how RESULT keys spell configurations."""

import os
import shutil
import stat
import sys
import tempfile
import unittest

from pylib.analysis import codec_spec
from pylib.analysis import configurations as cfg
import junit_main

# What the stand-in worker answers: text -> canonical form; any other text is refused.
CANONICAL = {"fp32": "fp32", "fp16": "fp16", "FP16": "fp16", "topk:0.01": "topk:0.01",
             "TopK: 0.01,Exact": "topk:0.01,exact", "topk:0.01,fp16": "topk:0.01,fp16",
             "topk:0.01,fp16,exact": "topk:0.01,fp16,exact", "topk:0.01,exact": "topk:0.01,exact",
             "csc:0.05": "csc:0.05", "CSC:0.05": "csc:0.05",
             "csc:0.05,chunk=4096": "csc:0.05,chunk=4096"}
STAND_IN = r"""#!PYTHON
import sys
table = TABLE
arg = sys.argv[1]
with open(sys.argv[0] + ".asked", "a") as f:
    f.write(arg + "\n")
if not arg.startswith("--print_codec="):
    sys.exit("ERROR: unknown command line flag " + repr(arg))
text = arg.split("=", 1)[1]
if text in table:
    print(table[text])
else:
    print("W1126 worker.cc:12] starting", file=sys.stderr)
    print(f"worker: push_codec: unknown codec '{text}' (want fp32, fp16, ...)", file=sys.stderr)
    sys.exit(2)
"""


def fake_parse(text):
    """The table as a parse_codec for the list tests."""
    if text not in CANONICAL:
        raise ValueError(f"codec {text!r}: unknown codec")
    return CANONICAL[text]


class WorkerCodecParserTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="codec_spec_test.")
        self.addCleanup(shutil.rmtree, self.dir)
        self.worker = os.path.join(self.dir, "worker")
        with open(self.worker, "w") as f:
            f.write(STAND_IN.replace("PYTHON", sys.executable).replace("TABLE", repr(CANONICAL)))
        os.chmod(self.worker, stat.S_IRWXU)

    def asked(self):
        with open(self.worker + ".asked") as f:
            return f.read().splitlines()

    def test_the_workers_canonical_form(self):
        parse = codec_spec.WorkerCodecParser(self.worker)
        self.assertEqual(parse("TopK: 0.01,Exact"), "topk:0.01,exact")
        self.assertEqual(parse("FP16"), "fp16")
        self.assertEqual(parse("TopK: 0.01,Exact"), "topk:0.01,exact")
        self.assertEqual(self.asked(), ["--print_codec=TopK: 0.01,Exact", "--print_codec=FP16"])

    def test_a_refusal_carries_the_workers_reason(self):
        parse = codec_spec.WorkerCodecParser(self.worker)
        for _ in range(2):  # the refusal is remembered too
            with self.assertRaises(ValueError) as e:
                parse("int8")
            self.assertEqual(str(e.exception), "codec 'int8': worker: push_codec: unknown codec "
                                               "'int8' (want fp32, fp16, ...)")
        self.assertEqual(self.asked(), ["--print_codec=int8"])

    def test_a_worker_without_the_flag_or_no_worker(self):
        with open(self.worker, "w") as f:
            f.write("#!/bin/sh\necho \"ERROR: unknown command line flag 'print_codec'\" >&2\nexit 1\n")
        with self.assertRaisesRegex(codec_spec.CodecCheckUnavailable,
                                    rf"^{self.worker} has no --print_codec: rebuild it "):
            codec_spec.WorkerCodecParser(self.worker)("fp16")
        missing = os.path.join(self.dir, "none")
        with self.assertRaisesRegex(codec_spec.CodecCheckUnavailable,
                                    rf"^cannot ask {missing} about codec 'fp16': "):
            codec_spec.WorkerCodecParser(missing)("fp16")


class ModeListsTest(unittest.TestCase):
    def test_modes_keep_a_sparse_codecs_options(self):
        self.assertEqual(cfg.split_modes("bsp,r2sp+topk:0.01,fp16,exact,asp", fake_parse),
                         ["bsp", "r2sp+topk:0.01,fp16,exact", "asp"])
        self.assertEqual(cfg.split_modes("r2sp+csc:0.05,chunk=4096,bsp+fp16", fake_parse),
                         ["r2sp+csc:0.05,chunk=4096", "bsp+fp16"])
        self.assertEqual(cfg.split_modes("bsp", fake_parse), ["bsp"])

    def test_elastic_modes(self):
        self.assertEqual(cfg.split_modes("easgd,eawild,eawild+FP16", fake_parse),
                         ["easgd", "eawild", "eawild+fp16"])
        self.assertEqual(cfg.MODES["easgd"], ("easgd", ""))
        self.assertEqual(cfg.MODES["eawild"], ("eawild", ""))
        self.assertEqual(cfg.ELASTIC, ("easgd", "eawild"))

    def test_semicolons_separate_modes(self):
        self.assertEqual(cfg.split_modes("bsp;r2sp+topk:0.01,fp16", fake_parse), ["bsp", "r2sp+topk:0.01,fp16"])

    def test_codecs_are_spelt_as_the_worker_spells_them(self):
        self.assertEqual(cfg.split_modes("bsp+FP16,r2sp+TopK: 0.01,Exact,asp+", fake_parse),
                         ["bsp+fp16", "r2sp+topk:0.01,exact", "asp"])

    def test_an_option_after_no_sparse_codec_is_an_unknown_mode(self):
        for text in ("bsp,fp16", "r2sp+fp16,fp16", "fp16,bsp", "bsp,fast"):
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, "unknown mode"):
                    cfg.split_modes(text, fake_parse)

    def test_a_bad_codec_in_a_mode(self):
        with self.assertRaisesRegex(ValueError, r"^codec 'csc:0.05,exact': unknown codec$"):
            cfg.split_modes("bsp,r2sp+csc:0.05,exact", fake_parse)

    def test_codecs(self):
        self.assertEqual(cfg.split_codecs("fp32,fp16,topk:0.01", fake_parse), ["fp32", "fp16", "topk:0.01"])
        self.assertEqual(cfg.split_codecs("topk:0.01,exact,csc:0.05,chunk=4096", fake_parse),
                         ["topk:0.01,exact", "csc:0.05,chunk=4096"])
        self.assertEqual(cfg.split_codecs("fp16,CSC:0.05", fake_parse), ["fp16", "csc:0.05"])
        self.assertEqual(cfg.split_codecs("topk:0.01,fp16;fp16;fp32", fake_parse),
                         ["topk:0.01,fp16", "fp16", "fp32"])

    def test_fp16_after_a_sparse_codec_is_ambiguous(self):
        with self.assertRaisesRegex(ValueError, "Separate the codecs with ';'"):
            cfg.split_codecs("fp32,topk:0.01,fp16", fake_parse)

    def test_unknown_codec(self):
        with self.assertRaisesRegex(ValueError, r"^codec 'int8': unknown codec$"):
            cfg.split_codecs("fp32,int8", fake_parse)
        with self.assertRaisesRegex(ValueError, r"^codec 'exact': unknown codec$"):
            cfg.split_codecs("fp16,exact", fake_parse)

    def test_every_mode_with_every_codec_mode_by_mode(self):
        self.assertEqual(cfg.mode_codec_names(["bsp", "r2sp"], ["fp32", "fp16", "topk:0.01"]),
                         ["bsp", "bsp+fp16", "bsp+topk:0.01", "r2sp", "r2sp+fp16",
                          "r2sp+topk:0.01"])

    def test_ddp_and_its_fp16_hook(self):
        def refuse(codec):
            raise AssertionError(f"the worker was asked about ddp's codec {codec}")
        self.assertEqual(cfg.split_modes("bsp,ddp,ddp+FP16,ddp@slow", refuse),
                         ["bsp", "ddp", "ddp+fp16", "ddp@slow"])
        self.assertEqual([cfg.is_ddp(m) for m in ("ddp", "ddp+fp16@x", "bsp", "r2sp+fp16")],
                         [True, True, False, False])
        self.assertEqual(cfg.split_mode("ddp+fp16"), ("ddp", "fp16"))

    def test_ddp_takes_no_other_codec(self):
        with self.assertRaisesRegex(ValueError, r"^ddp\+topk:0.01: DDP takes \+fp16 only \(its "
                                                r"fp16 compression hook\)"):
            cfg.split_modes("ddp+topk:0.01", fake_parse)

    def test_codec_lists_give_ddp_only_fp32_and_fp16(self):
        self.assertEqual(cfg.mode_codec_names(["r2sp", "ddp"], ["fp32", "fp16", "topk:0.01"]),
                         ["r2sp", "r2sp+fp16", "r2sp+topk:0.01", "ddp", "ddp+fp16"])

    def test_result_key(self):
        self.assertEqual(cfg.result_key("r2sp_hetero+fp16"), "r2sp_hetero+fp16")
        self.assertEqual(cfg.result_key("r2sp+topk:0.01"), "r2sp+topk_0.01")
        self.assertEqual(cfg.result_key("bsp+csc:0.05,fp16,chunk=4096"),
                         "bsp+csc_0.05_fp16_chunk_4096")



if __name__ == "__main__":
    junit_main.main()

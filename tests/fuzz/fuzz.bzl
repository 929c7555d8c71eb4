"""r2sp_fuzz_target: a libFuzzer target and the regression test that replays its seed corpus.

r2sp_fuzz_target(name, srcs, deps, corpus) makes
  NAME_lib           the target's code (LLVMFuzzerTestOneInput), alwayslink;
  NAME               a binary: with --config=fuzz, libFuzzer's (-fsanitize=fuzzer); in any
                     other build, replay_main's, which runs the files it is given once (so
                     //... builds with gcc, and a crash input replays anywhere);
  NAME_corpus_test   runs every file under `corpus` (default corpus/NAME) through the target:
                     a crash fails it. Under --config=asan it runs with the sanitizers.
"""

def r2sp_fuzz_target(name, srcs, deps = [], corpus = None):
    corpus = corpus or "corpus/" + name
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = deps + [":fuzz_input"],
        alwayslink = True,
    )
    native.cc_binary(
        name = name,
        testonly = True,
        deps = [":" + name + "_lib"] + select({
            ":fuzzing": [],
            "//conditions:default": [":replay_main"],
        }),
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        args = ["tests/fuzz/" + corpus],
        data = native.glob([corpus + "/*"]),
        deps = [
            ":" + name + "_lib",
            ":replay_main",
        ],
    )

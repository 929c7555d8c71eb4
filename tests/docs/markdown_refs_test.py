"""tests/docs/markdown_refs.py: the flags a Markdown text names, attributed by fenced commands,
code spans, program tables and prose, and the repository paths it names."""

import unittest

import junit_main
from markdown_refs import FlagRef, PathRef, flag_refs, path_refs

DOC = """# Title

Run `tools/launch --servers=2` or, in prose, --overlap; `--made_up` too.

```sh
tools/netcluster --server_link=1gbit \\
    --worker_flags="--epochs=1"
bazel test --config=asan //tests/...
```

| binary | flag | default | meaning |
|---|---|---|---|
| scheduler | `--num_servers`, `--num_workers` | 1 | see `worker --threads` |
| | `--sync` | asp | passed on |
| all three | `--version` | | |

| mode | flag |
|---|---|
| bsp | `--staleness` |
"""


class FlagRefsTest(unittest.TestCase):
    def test_every_rule(self):
        refs = flag_refs(DOC, "d.md")
        self.assertEqual(sorted(refs, key=lambda r: (r.line, str(r.program), r.flag)), [
            FlagRef(None, "made_up", "d.md", 3),
            FlagRef(None, "overlap", "d.md", 3),
            FlagRef("tools/launch", "servers", "d.md", 3),
            FlagRef("tools/netcluster", "server_link", "d.md", 6),
            FlagRef("tools/netcluster", "worker_flags", "d.md", 6),
            FlagRef("worker", "epochs", "d.md", 6),
            FlagRef("scheduler", "num_servers", "d.md", 13),
            FlagRef("scheduler", "num_workers", "d.md", 13),
            FlagRef("worker", "threads", "d.md", 13),
            FlagRef("scheduler", "sync", "d.md", 14),
            FlagRef("scheduler", "version", "d.md", 15),
            FlagRef("server", "version", "d.md", 15),
            FlagRef("worker", "version", "d.md", 15),
            FlagRef(None, "staleness", "d.md", 19),
        ])

    def test_a_table_cell_of_several_programs(self):
        text = "| tool | flag |\n|---|---|\n| `tools/launch` (and `tools/netcluster`) | `--x` |\n"
        self.assertEqual(flag_refs(text, "d.md"), [FlagRef("tools/launch", "x", "d.md", 3),
                                                   FlagRef("tools/netcluster", "x", "d.md", 3)])

    def test_a_span_across_lines(self):
        self.assertEqual(flag_refs("see `tools/soak\n--minutes=30`.", "d.md"),
                         [FlagRef("tools/soak", "minutes", "d.md", 1)])


class PathRefsTest(unittest.TestCase):
    def test_paths_and_labels(self):
        text = ("docs/MODES.md and `tools/launch`, (`tests/fuzz/corpus/TARGET`).\n"
                "`//tools/bench:codec_benchmark` `bazel test //tests/...` tcp://A:9000 "
                "https://ui.perfetto.dev runs/TIMESTAMP scheduler/server/worker binaries")
        self.assertEqual([r.path for r in path_refs(text, "d.md")], [
            "docs/MODES.md", "tools/launch", "tests/fuzz/corpus/TARGET",
            "//tools/bench:codec_benchmark", "//tests/", "scheduler/server/worker"])
        self.assertEqual(path_refs("x\n tools/demo.", "d.md"), [PathRef("tools/demo", "d.md", 2)])


if __name__ == "__main__":
    junit_main.main()

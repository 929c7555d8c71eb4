"""tests/docs/doc_rules.py: line budgets, the words about how the work was organised (and
their technical uses), GitHub's anchors and the links into files and headings, each with the
exact problem reported."""

import os
import shutil
import tempfile
import unittest

import doc_rules
import junit_main


class BudgetTest(unittest.TestCase):
    def test_only_docs_over_their_budget(self):
        docs = {"README.md": "a\n" * 3, "docs/RESULTS.md": "a\n" * 5, "docs/OTHER.md": "a\n" * 99}
        self.assertEqual(doc_rules.over_budget(docs, {"README.md": 3, "docs/RESULTS.md": 4}),
                         ["docs/RESULTS.md: 5 lines, over its budget of 4"])


class WorkTalkTest(unittest.TestCase):
    def test_each_word_found_with_its_line(self):
        text = ("Fine text.\nNo GPU was lent this session.\nAs agreed for issue 33 and Issue #4.\n"
                "the issue's goal\n(issue: Core)\ndevice time, the device tool, not_drawn\n"
                "copied to .gpu_carry/\n")
        found = [p.split(": \"")[1].split("\"")[0] for p in doc_rules.work_talk("a.md", text)]
        self.assertEqual(found, ["lent", "session", "issue 33", "Issue #4", "the issue's",
                                 "(issue:", "device time", "device tool", "not_drawn",
                                 ".gpu_carry"])
        self.assertEqual(doc_rules.work_talk("a.md", "see issue 12")[0],
                         "a.md:1: \"issue 12\" speaks of how the work was organised, not of the "
                         "project: see issue 12")

    def test_technical_uses_pass(self):
        text = ("subprocess.Popen(argv, start_new_session=True)  # in its own session\n"
                "class ClientSession;  // client_session.h\n"
                "an ssh session per host; a session of its own\n"
                "issued requests; the tissue; silent; excellent\n")
        self.assertEqual(doc_rules.work_talk("tools/x.py", text), [])

    def test_a_files_own_allowance_holds_only_there(self):
        self.assertEqual(doc_rules.work_talk("worker/python/core_module.cc",
                                             "return x.session().size();"), [])
        self.assertEqual(doc_rules.work_talk("common/book_frame.h", "a frame it lent"), [])
        self.assertEqual(len(doc_rules.work_talk("server/x.h", "return x.session().size();")), 1)
        self.assertEqual(len(doc_rules.work_talk("server/x.h", "a frame it lent")), 1)


class AnchorTest(unittest.TestCase):
    def test_githubs_anchors(self):
        self.assertEqual(doc_rules.anchor("A server's update work"), "a-servers-update-work")
        self.assertEqual(doc_rules.anchor("Many workers: the simulator"),
                         "many-workers-the-simulator")
        self.assertEqual(doc_rules.anchor("`tools/launch`"), "toolslaunch")
        self.assertEqual(doc_rules.anchor("See [DEPLOY](DEPLOY.md) now"), "see-deploy-now")

    def test_repeated_headings_numbered_fenced_ones_ignored(self):
        text = "# Top\n## Setup\n```\n## not a heading\n```\n### Setup\n## Setup ##\n"
        self.assertEqual(doc_rules.anchors(text), {"top", "setup", "setup-1", "setup-2"})


class LinkTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        os.makedirs(os.path.join(self.root, "docs", "results"))
        open(os.path.join(self.root, "docs", "results", "plot.png"), "wb").close()

    def test_each_broken_link_named(self):
        docs = {
            "README.md": "[ok](docs/B.md#the-demo) [web](https://x.org/a#b) [gone](docs/C.md)\n"
                         "```\n[in a block](nowhere.md)\n```\n[bad](docs/B.md#no-such)\n",
            "docs/B.md": "## The demo\n![plot](results/plot.png) [self](#the-demo) "
                         "[up](../README.md) [miss](#missing)\n",
        }
        self.assertEqual(doc_rules.broken_links(docs, self.root), [
            "README.md:1: docs/C.md: no such file",
            "README.md:5: docs/B.md#no-such: no heading of docs/B.md has the anchor #no-such",
            "docs/B.md:2: #missing: no heading of docs/B.md has the anchor #missing",
        ])

    def test_a_link_into_a_file_not_given_reads_it(self):
        with open(os.path.join(self.root, "docs", "D.md"), "w") as f:
            f.write("# Title\n")
        for name in ("README.md", "docs/B.md"):
            open(os.path.join(self.root, name), "w").close()
        docs = {"README.md": "[d](docs/D.md#title) [e](docs/D.md#other)\n"}
        self.assertEqual(doc_rules.broken_links(docs, self.root), [
            "README.md:1: docs/D.md#other: no heading of docs/D.md has the anchor #other"])


if __name__ == "__main__":
    junit_main.main()

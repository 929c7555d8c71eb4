"""tools/pylib/cluster/results.py: the hosts' markers and the processes' exit records read from
a file:// results prefix (the s3:// store lists the same names through `aws s3 ls`)."""

import os
import tempfile
import unittest

import junit_main
from pylib.cluster import results


class ResultsTest(unittest.TestCase):
    def test_markers_and_exits_from_the_names_under_the_prefix(self):
        with tempfile.TemporaryDirectory() as d:
            store = results.open_store("file://" + d + "/run1")
            self.assertEqual((store.names(), store.markers()), ([], {}))
            os.makedirs(os.path.join(d, "run1", "a"))
            for name in ("a.done", "b.reclaimed", "b.r1.failed", "b.r1.done", "worker1.exit-143",
                         "worker1.r1.exit-0", "server0.exit-x", "c.other"):
                open(os.path.join(d, "run1", name), "w").close()
            self.assertEqual(store.markers(), {"a": "done", "b": "reclaimed", "b.r1": "failed"})
            self.assertEqual(results.exits(store.names()), {"worker1": 143, "worker1.r1": 0})

    def test_an_unknown_scheme_is_refused(self):
        with self.assertRaisesRegex(results.StoreError, "^gs://b/r: not an s3:// or file:// URL$"):
            results.open_store("gs://b/r")


if __name__ == "__main__":
    junit_main.main()

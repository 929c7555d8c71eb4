"""Runs a test module's unittest cases and, under Bazel, writes one JUnit <testcase> per test
method to $XML_OUTPUT_FILE. Bazel 4.2 would otherwise write its own report with one test case
for the whole target, and tools/test counts test cases from these reports.

A test file ends with:  if __name__ == "__main__": junit_main.main()"""

import os
import sys
import time
import unittest
import xml.etree.ElementTree as ET


class _Result(unittest.TextTestResult):
    """Keeps every test's outcome: {test id: [outcome or None, message, details, seconds]}."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = {}
        self._started = {}

    def startTest(self, test):
        self._started[test.id()] = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, message="", details=""):
        seconds = time.monotonic() - self._started.get(test.id(), time.monotonic())
        case = self.cases.setdefault(test.id(), [None, "", "", seconds])
        if outcome and not case[0]:  # the first failure of a test (its subtests') is the one shown
            case[:3] = [outcome, message, details]
        case[3] = seconds

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, None)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", str(err[1]), self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", str(err[1]), self._exc_info_to_string(err, test))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "failure" if issubclass(err[0], test.failureException) else "error"
            self._record(test, kind, f"{subtest}: {err[1]}", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, None)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failure", "unexpected success")


def junit_xml(cases, name):
    """The JUnit report of `cases` ({test id: [outcome, message, details, seconds]})."""
    count = {o: sum(1 for c in cases.values() if c[0] == o) for o in ("failure", "error", "skipped")}
    total = f"{sum(c[3] for c in cases.values()):.3f}"
    attrs = {"tests": str(len(cases)), "failures": str(count["failure"]),
             "errors": str(count["error"]), "skipped": str(count["skipped"]), "time": total}
    root = ET.Element("testsuites", attrs)
    suite = ET.SubElement(root, "testsuite", dict(attrs, name=name))
    for test_id, (outcome, message, details, seconds) in cases.items():
        classname, _, method = test_id.rpartition(".")
        if classname.startswith("__main__."):  # the test file run as a script
            classname = name + classname[len("__main__"):]
        case = ET.SubElement(suite, "testcase", {"name": method, "classname": classname,
                                                 "time": f"{seconds:.3f}"})
        if outcome:
            element = ET.SubElement(case, outcome, {"message": message})
            element.text = details
    return ET.tostring(root, encoding="unicode")


def main():
    runner = unittest.TextTestRunner(resultclass=_Result, verbosity=2)
    result = unittest.main(module="__main__", testRunner=runner, exit=False).result
    path = os.environ.get("XML_OUTPUT_FILE")
    if path:
        name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        with open(path, "w") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n')
            f.write(junit_xml(result.cases, name))
            f.write("\n")
    sys.exit(0 if result.wasSuccessful() else 1)

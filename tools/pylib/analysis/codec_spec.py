"""Wire codec names (a worker's --push_codec) as the worker itself reads them: the grammar lives
once, in common/codec/codec_spec.cc (ParseCodecSpec, CodecSpecName), and this module asks the
worker binary for it instead of keeping a copy:

  worker --print_codec=TEXT   prints TEXT's canonical form and exits 0, or says why the worker
                              would refuse it as a --push_codec on stderr and exits non-zero

tools/compare_modes spells each configuration's codec in that canonical form (its run
directories and RESULT keys are named after it) and refuses a bad one before any job runs. The
worker is asked once per distinct text."""

import subprocess

FLAG = "--print_codec"


class CodecCheckUnavailable(Exception):
    """The worker binary cannot be asked (missing, or built before it had --print_codec)."""


class WorkerCodecParser:
    """Callable: the canonical form of a --push_codec text; ValueError with the worker's reason
    when it refuses it. Not thread-safe (its cache)."""

    def __init__(self, worker, timeout=30):
        self.worker = worker  # the worker binary's path
        self.timeout = timeout
        self._known = {}  # text -> canonical form, or the ValueError the worker gave

    def __call__(self, text):
        if text not in self._known:
            self._known[text] = self._ask(text)
        found = self._known[text]
        if isinstance(found, ValueError):
            raise found
        return found

    def _ask(self, text):
        try:
            r = subprocess.run([self.worker, f"{FLAG}={text}"], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CodecCheckUnavailable(f"cannot ask {self.worker} about codec {text!r}: {e}")
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
        why = (r.stderr or r.stdout).strip()
        if FLAG[2:] in why and "unknown" in why.lower():
            raise CodecCheckUnavailable(f"{self.worker} has no {FLAG}: rebuild it "
                                        "(bazel build -c opt //worker)")
        return ValueError(f"codec {text!r}: {why.splitlines()[-1] if why else 'refused'}")

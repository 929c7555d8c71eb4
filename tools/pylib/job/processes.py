"""The processes of a job run from this machine (tools/launch's local processes, the ssh backend's
ssh commands): each started in its own session with its output in RUN_DIR/NAME.log, workers'
progress echoed, and all of them stopped together."""

import os
import signal
import subprocess
import sys
import threading
import time

from . import supervisor
from .errors import JobError


class Job:
    """The processes of one job. `prefix(name)` gives the argv prefix a process runs under
    (e.g. ip netns exec NS; for a replacement, worker1.r1, that of the process it replaces,
    worker1), `on_start(name, pid)` sees each new process (replacements included). Processes
    are added from the main thread; the echo threads only read their own process's output."""

    def __init__(self, args, prefix=None, on_start=None, hold_stdin=False):
        self.args = args
        # With hold_stdin each process gets a pipe as stdin that stays open while it runs (the
        # ssh backend: its end of file stops the remote process).
        self.hold_stdin = hold_stdin
        self._procs = []  # (name, Popen), guarded by _lock
        self._commands = {}  # name -> (argv, echo) it was started with; main thread only
        self._lock = threading.Lock()
        self.prefix = prefix or (lambda name: [])
        self.on_start = on_start

    def binary(self, role):
        """BIN_DIR/ROLE/ROLE (a bazel-bin), or BIN_DIR/ROLE (a bundle's or the wheel's bin/)."""
        path = os.path.join(self.args.bin_dir, role, role)
        flat = os.path.join(self.args.bin_dir, role)
        if not os.access(path, os.X_OK) and os.path.isfile(flat) and os.access(flat, os.X_OK):
            return flat
        if not os.access(path, os.X_OK):
            raise JobError(f"{path} not found; build first: bazel build -c opt //scheduler //server //worker")
        return path

    def procs(self):
        """[(name, Popen)] started so far."""
        with self._lock:
            return list(self._procs)

    def command(self, name):
        """(argv, echo) process `name` was started with."""
        return self._commands[name]

    def start(self, name, argv, echo):
        """Starts `argv` as process `name`, stdout and stderr into RUN_DIR/NAME.log; with `echo`
        its stdout also goes to ours (unless --quiet)."""
        self._commands[name] = (argv, echo)
        with open(os.path.join(self.args.run_dir, name + ".log"), "wb") as log:
            proc = subprocess.Popen(self.prefix(supervisor.slot(name)) + argv,
                                    stdout=subprocess.PIPE if echo else log,
                                    stderr=log, start_new_session=True,
                                    stdin=subprocess.PIPE if self.hold_stdin else None)
            # The echo thread writes through a duplicate: one file offset with the child's stderr.
            echo_fd = os.dup(log.fileno()) if echo else None
        if echo:
            threading.Thread(target=self._echo, args=(proc, echo_fd), daemon=True).start()
        with self._lock:
            self._procs.append((name, proc))
        if self.on_start:
            self.on_start(name, proc.pid)
        return proc

    def _echo(self, proc, log_fd):
        with open(log_fd, "wb") as log:
            for line in iter(proc.stdout.readline, b""):
                log.write(line)
                log.flush()
                if not self.args.quiet:
                    sys.stdout.write(line.decode(errors="replace"))
                    sys.stdout.flush()

    def finished(self):
        return all(proc.poll() is not None for _, proc in self.procs())

    def stop_all(self):
        """SIGTERM to every process group still running; SIGKILL to those left after 5 s.
        Returns [(name, exit status)] of the processes it stopped."""
        procs = self.procs()
        running = [(name, proc) for name, proc in procs if proc.poll() is None]
        for _, proc in running:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.time() + 5
        for _, proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return [(name, proc.returncode) for name, proc in running]

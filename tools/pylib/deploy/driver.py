"""The run skeleton every remote backend (ssh, slurm, k8s, ec2) shares; a backend supplies only
its hooks (Backend). The driver owns:

  dry run     Backend.describe() prints what would run; nothing is written, not even the run
              directory or the job's keys (the text names RUN_DIR/keys where they would go)
  bundle      a tarball the hosts will unpack is checked first (archive.check_tarball): one
              that would write outside its directory is refused before anything is written
  run dir     RUN_DIR made (launcher.prepare_run_dir), the job's keys made or checked there
              (--auth=curve), before any hook runs
  order       prepare (untimed: files the job needs), launch (the clock has started), then
              poll every poll_seconds until the job completes, then finish
  timeout     --timeout counted from launch (job.deadline.Deadline), checked between polls
  cleanup     on every exit path (success, JobError, Ctrl-C's Interrupted, any exception): stop
              on failure, then clean_up (keys removed, cloud objects deleted), then collect
              (results into RUN_DIR, best effort); a failing cleanup is an error of its own
              unless the job had already failed, whose error then wins
  summary     RUN_DIR/summary.json from what collect brought back (launcher.finish_job), with
              the backend's outcome (deaths, restarts, events) where it supervises its processes

Hooks run on the launcher's main thread, one at a time."""

import dataclasses
import os
import sys
import time

from ..cluster import role_commands
from ..job import keys as job_keys
from ..job import launcher
from ..job import resume
from ..job.deadline import Deadline
from ..job.errors import JobError
from . import archive

DRY_RUN_DIR = os.path.join(launcher.ROOT, "runs", "TIMESTAMP")  # named by a dry run's text


@dataclasses.dataclass
class Run:
    """What every hook may read about the run."""
    args: object          # tools/launch's options (their run_dir set once the run is real)
    cluster: object       # cluster_file.Cluster
    tarball: str | None   # the release bundle (k8s with [k8s] image: None)
    keys: str | None      # --auth=curve: the local directory of the job's keys; else None
    dry_run: bool = False

    @property
    def run_dir(self):
        return self.args.run_dir or DRY_RUN_DIR

    @property
    def job_dir(self):
        """JOB-RUN: the run's directory name on the hosts (TIMESTAMP in a dry run)."""
        return role_commands.job_dir(self.cluster, self.args.run_dir)

    @property
    def extra_flags(self):
        """{role: [flags]} of the launcher's --*_flags, after the cluster file's."""
        return role_commands.extra_flags_from(self.args)


class Backend:
    """A remote backend's hooks, built from the Run (a dry run's too: the constructor must
    write nothing). Only describe, launch and poll are required."""

    poll_seconds = 1.0  # between polls
    outcome = None  # analysis.summary.Outcome of a backend that supervises (else a clean run's)
    resumable = False  # RUN_DIR/launch.json saved: tools/launch --resume (its checkpoint_url)
    ships_bundle = True  # the tarball goes to the hosts (checked first: archive.check_tarball)

    def __init__(self, run):
        self.run = run

    def describe(self):
        """The dry run's text: every command the run would run. Writes nothing."""
        raise NotImplementedError

    def prepare(self):
        """Before the clock starts: files the job needs in place (a batch script, manifests)."""

    def launch(self):
        """Starts the job (ships what it needs, starts its processes); says so on stdout."""
        raise NotImplementedError

    def poll(self):
        """True once the job has completed; False while it runs; JobError when it failed."""
        raise NotImplementedError

    def finish(self):
        """After completion, before cleanup (e.g. waiting for the last logs)."""

    def stop(self):
        """After a failure or an interruption: stop whatever still runs."""

    def clean_up(self):
        """Always: removes what the run left behind (keys, cloud objects). Returns the problems,
        each a sentence naming what may be left; never raises."""
        return []

    def collect(self):
        """Always, after clean_up: the run's results into RUN_DIR, best effort (never raises:
        a host that died has nothing to give, and the job's own error says why)."""


def follow(backend, deadline):
    """Polls the backend until the job completes; JobError when it fails or runs past the
    deadline."""
    while not backend.poll():
        deadline.check()
        time.sleep(backend.poll_seconds)


def run(args, cluster, tarball, backend_class):
    """Runs the job with `backend_class`'s hooks; returns its summary (also RUN_DIR/summary.json),
    or None with --dry_run. JobError when it fails; whatever the exception, the backend has
    stopped, cleaned up and collected first."""
    if args.dry_run:
        keys = job_keys.keys_dir(args) if job_keys.curve(args) else None
        print(backend_class(Run(args, cluster, tarball, keys, dry_run=True)).describe())
        return None
    if tarball and backend_class.ships_bundle:  # hosts unpack it with their own tar
        try:
            archive.check_tarball(tarball)
        except archive.UnsafeArchive as e:
            raise JobError(f"{tarball}: not shipped: {e}")
    _, stats_file = launcher.prepare_run_dir(args)
    if backend_class.resumable:  # tools/launch --resume=RUN_DIR runs it again
        resume.save_options(args)
    backend = backend_class(Run(args, cluster, tarball, job_keys.prepare(args)))
    failure, start = None, time.time()
    try:
        try:
            backend.prepare()
            start = time.time()
            backend.launch()
            follow(backend, Deadline(start, args.timeout))
            backend.finish()
        except BaseException as e:  # noqa: BLE001 - passed on after the cleanup
            failure = e
            backend.stop()
    finally:
        problems = backend.clean_up()
        wall = time.time() - start
        backend.collect()
    if problems:
        message = "cleaning up failed: " + "; ".join(problems)
        if failure:
            print(f"launch: {message}", file=sys.stderr)
        else:
            raise JobError(message)
    if failure:
        raise failure
    return launcher.finish_job(args, wall, {}, stats_file, backend.outcome)

"""The EC2 backend's processes as job.supervisor supervises a job: what the launcher knows of a
process on an instance, and the replacement instances it starts.

How the launcher learns of a death (every POLL_SECONDS; nothing reaches the instances but their
user-data and the metadata service):
  exit records  each host leaves RESULTS/NAME.exit-STATUS as a process ends (results.exits):
                a status other than 0 is a death, recorded as the local launcher records one
  reclaimed     HOST.reclaimed (a spot interruption notice: the host stopped its servers,
                their checkpoints uploaded, then the others): every process of the host that
                left no exit record died with status 143 (SIGTERM's)
  lost          an instance that is no longer pending or running (describe-instances) and left
                no marker: every process of it without an exit record died with status 137
                (SIGKILL's: it went with its instance)
  failed        HOST.failed (the host could not start its processes: the bundle, the data, the
                keys) fails the job, as before.
While --max_restarts allows, job.supervisor asks for a dead process's replacement (worker1.r1);
the replacements asked for in one look at the job go together onto one new instance per host
entry, HOST.rK (its own results, HOST.rK/ and HOST.rK.done), whose user-data starts only them
(ec2_plan.Plan.user_data with `replacing`): they join the running job, and a server restores its
shard from the checkpoint_url. A reclaimed or lost instance is terminated (it may linger)."""

import dataclasses
import os
import time

from ..cluster import results as result_store
from ..cluster import role_commands
from ..job.errors import JobError
from ..job import supervisor
from . import recovery
from .ec2_plan import POLL_SECONDS

RECLAIMED_STATUS = 143  # stopped by SIGTERM for a spot interruption
LOST_STATUS = 137  # gone with its instance
LIVE_STATES = ("pending", "running")


@dataclasses.dataclass
class RemoteProcess:
    """A process on an instance, as job.supervisor sees a Popen: poll() is its exit status once
    known, else None. pid is None: there is no local process."""
    name: str
    host: str  # the instance it runs on: a host entry's name, or a replacement's (b.r1)
    returncode: int | None = None
    pid = None

    def poll(self):
        return self.returncode


class Ec2Processes:
    """The job's processes on its instances (job.supervisor's Job interface: procs, finished,
    stop_all, args), updated from the results store and the instances' states at most every
    POLL_SECONDS; not thread-safe (the launcher's main thread). launch(key, host, replacing)
    starts the replacement instance `key` (b.r1) of the host entry `host` running `replacing`
    ({process: replacement name}) and returns its instance id."""

    def __init__(self, args, plan, aws, store, started, launch):
        self.args, self.plan, self.aws, self.store, self.started = args, plan, aws, store, started
        self.launch = launch
        self._procs = [(p.name, RemoteProcess(p.name, h.name))
                       for _, h, p in role_commands.scheduler_first(plan.cluster)]
        self.gone = set()  # instances whose processes were counted dead (reclaimed, lost)
        self._reported = set()  # instances whose marker was said
        self._pending = {}  # host entry -> (instance key, {process: replacement name})
        self._copies = {}  # host entry -> replacement instances started for it
        self._looked = 0.0

    def procs(self):
        """[(name, RemoteProcess)], after a look at the job when one is due; the replacements
        asked for since the last call started first."""
        self._start_pending()
        if time.time() - self._looked >= POLL_SECONDS:
            self._looked = time.time()
            self.look()
        return list(self._procs)

    def finished(self):
        return all(proc.returncode is not None for _, proc in self._procs)

    def stop_all(self):
        """The processes still running, said stopped (the cleanup terminates their instances):
        [(name, None)]."""
        running = [(name, None) for name, proc in self._procs if proc.returncode is None]
        for _, proc in self._procs:
            if proc.returncode is None:
                proc.returncode = -15
        return running

    def look(self):
        """Reads the exit records, the markers and the instances' states once."""
        reservations = self.aws.json(self.plan.describe_instances(), "describe-instances")["Reservations"]
        states = {i["InstanceId"]: i["State"]["Name"] for r in reservations for i in r["Instances"]}
        names = self.store.names()  # after the states: a host writes its marker before it stops
        exits, markers = result_store.exits(names), result_store.markers_of(names)
        for name, proc in self._procs:
            if proc.returncode is None and name in exits:
                proc.returncode = exits[name]
        for host, kind in markers.items():
            if kind == "failed":
                raise JobError(f"{host} failed: {self.store.marker_text(host, 'failed')}")
            if host not in self._reported:
                self._reported.add(host)
                print(f"launch: {host} {kind}: {self.store.marker_text(host, kind)}", flush=True)
        for host, instance_id in list(self.started.instances.items()):
            state = states.get(instance_id, "terminated")
            if host in self.gone or markers.get(host) == "done":
                continue
            if markers.get(host) == "reclaimed":
                self._lose(host, instance_id, RECLAIMED_STATUS, "was reclaimed (spot)")
            elif state not in LIVE_STATES:
                self._lose(host, instance_id, LOST_STATUS, f"is {state} and left no results")

    def _lose(self, host, instance_id, status, why):
        self.gone.add(host)
        dead = [proc for _, proc in self._procs if proc.host == host and proc.returncode is None]
        for proc in dead:
            proc.returncode = status
        print(f"launch: {host} ({instance_id}) {why}: {', '.join(p.name for p in dead) or 'no process'}"
              " counted dead", flush=True)
        try:  # it may linger (a reclaimed one until AWS takes it): it has nothing left to do
            self.aws.command(self.plan.terminate([instance_id]), f"terminating {host}")
        except JobError as e:
            print(f"launch: {e}", flush=True)

    def restart(self, dead, new):
        """job.supervisor's restart hook: `new` (worker1.r1) replaces `dead` on a new instance
        of the same host entry, started at the next procs()."""
        _, host, _ = recovery.placement(self.plan.cluster, new)
        if host.name not in self._pending:
            k = self._copies.get(host.name, 0) + 1
            self._copies[host.name] = k
            self._pending[host.name] = (f"{host.name}.r{k}", {})
        key, replacing = self._pending[host.name]
        replacing[supervisor.slot(new)] = new
        self._procs.append((new, RemoteProcess(new, key)))

    def _start_pending(self):
        pending, self._pending = self._pending, {}
        for host_name, (key, replacing) in pending.items():
            host = next(h for h in self.plan.cluster.hosts if h.name == host_name)
            try:
                self.started.instances[key] = self.launch(key, host, replacing)
            except JobError as e:  # counted as deaths of the replacements: the job may go on
                print(f"launch: starting {key} failed: {e}", flush=True)
                for _, proc in self._procs:
                    if proc.host == key:
                        proc.returncode = LOST_STATUS


def wait_for_results(store, started, gone, timeout):
    """After the job: waits (at most `timeout` s) until every instance not `gone` has left its
    done or reclaimed marker, its results then uploaded. Returns those that did not."""
    deadline = time.time() + timeout
    while True:
        markers = store.markers()
        missing = [h for h in started.instances if h not in gone and h not in markers]
        if not missing or time.time() >= deadline:
            return missing
        time.sleep(min(POLL_SECONDS, 1.0))

"""An emulated multi-host cluster on one machine: one network namespace per host (scheduler,
each server, each worker), each joined by a veth pair to a bridge that lives in a namespace of
its own (the machine's own network is never touched). Links are rate-shaped in both directions
with tc tbf (token bucket), with an optional delay from a netem qdisc where the kernel has one;
hosts get addresses in 198.18.0.0/15, the range reserved for network benchmarking. Workers can
be given a CPU quota (cgroup cpu controller). Cluster.down() tears everything down; the entry
script calls it on exit, on failure and on SIGINT/SIGTERM. Needs root. Failures of the ip and
tc commands are raised as ClusterError."""

import math
import os
import subprocess
import time

PREFIX = "r2sp"


class ClusterError(RuntimeError):
    """A command that builds or checks the cluster failed; the message says which and why."""


def run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}  # tc's names, longest first


def parse_rate(text):
    """'50mbit', '1gbit', '800kbit', '1.5Mbit' -> bits per second; ValueError unless a positive
    number followed by one of tc's bit units."""
    for unit, factor in RATE_UNITS.items():
        if text.lower().endswith(unit):
            try:
                value = float(text[: -len(unit)])
            except ValueError:
                break
            if not (value > 0 and math.isfinite(value)):
                break
            return value * factor
    raise ValueError(f"bad rate '{text}' (use e.g. 50mbit, 1gbit)")


def shaped_rate(text, time_dilation=1.0):
    """The bits per second a link given as `text` (tc text) is shaped to in a cluster running
    `time_dilation` times slower (tbf_options); ValueError as parse_rate."""
    return parse_rate(text) / time_dilation


def tbf_options(rate, time_dilation=1.0):
    """tc tbf's options for a link of `rate` (tc text) in a cluster running `time_dilation`
    times slower than the one it stands for: the rate divided by it, the bucket (4 ms of the
    undilated link's traffic, at least 32 KB) and the queue (100 ms of it before drops) the same
    in bytes, so each lasts `time_dilation` times as long. Time dilation lets a machine too slow
    for a setting's compute pace run it with pace and links slowed alike: every time in the run
    is then `time_dilation` times the setting's, every ratio between configurations is kept."""
    burst = max(32 * 1024, int(parse_rate(rate) / 8 * 0.004))
    return ["rate", f"{round(shaped_rate(rate, time_dilation))}bit", "burst", str(burst),
            "latency", f"{100 * time_dilation:g}ms"]


def can_run():
    """Why this machine cannot run a netcluster, or None if it can."""
    if os.geteuid() != 0:
        return "netcluster needs root (network namespaces, veth, tc)"
    for tool in ("ip", "tc"):
        if run(["sh", "-c", f"command -v {tool}"], check=False).returncode != 0:
            return f"netcluster needs '{tool}' (Debian package iproute2)"
    return None


def _cgroup_v2_cpu():
    """Whether the unified cgroup hierarchy (v2) offers the cpu controller."""
    path = "/sys/fs/cgroup/cgroup.controllers"
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return "cpu" in f.read().split()


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Cluster:
    """Hosts by name ('scheduler', 'server0', 'worker1', ...), each in its own namespace, or
    sharing another's: `colocated` maps a process host to the machine it runs on ("server0":
    "worker0": one namespace, one address, one link)."""

    def __init__(self, hosts, rates, delay_ms=0.0, colocated=None, time_dilation=1.0):
        self.tag = f"{PREFIX}{os.getpid()}"
        self.hosts = list(hosts)  # the machines: one namespace each
        self.rates = rates        # host -> rate text or None (unshaped), before dilation
        self.delay_ms = delay_ms
        self.time_dilation = time_dilation  # the links run this many times slower (tbf_options)
        self.colocated = dict(colocated or {})
        self.bridge_ns = f"{self.tag}-br"
        self.addresses = {h: f"198.18.0.{10 + i}" for i, h in enumerate(self.hosts)}
        self.addresses.update({h: self.addresses[m] for h, m in self.colocated.items()})
        self.cgroups = []
        self.created = []

    def machine(self, host):
        """The machine (namespace host) process host `host` runs on."""
        return self.colocated.get(host, host)

    def ns(self, host):
        return f"{self.tag}-{self.machine(host)}"

    def bridge_port(self, host):
        return f"p{self.hosts.index(self.machine(host))}"

    def placement(self):
        """{process host: {"machine", "namespace", "address", "link"}} of every host, the
        colocated ones included (RUN_DIR/hosts.json)."""
        return {h: {"machine": self.machine(h), "namespace": self.ns(h),
                    "address": self.addresses[h], "link": self.rates.get(self.machine(h)),
                    "time_dilation": self.time_dilation}
                for h in self.hosts + list(self.colocated)}

    def exec_prefix(self, host):
        return ["ip", "netns", "exec", self.ns(host)]

    def up(self):
        run(["ip", "netns", "add", self.bridge_ns])
        self.created.append(self.bridge_ns)
        b = ["ip", "-n", self.bridge_ns]
        run(b + ["link", "add", "br0", "type", "bridge"])
        run(b + ["link", "set", "br0", "up"])
        run(b + ["link", "set", "lo", "up"])
        for host in self.hosts:
            ns, port = self.ns(host), self.bridge_port(host)
            run(["ip", "netns", "add", ns])
            self.created.append(ns)
            # Created inside the bridge namespace, the host's end moved into its own.
            run(b + ["link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
            run(b + ["link", "set", port, "master", "br0"])
            run(b + ["link", "set", port, "up"])
            h = ["ip", "-n", ns]
            run(h + ["link", "set", "lo", "up"])
            run(h + ["addr", "add", f"{self.addresses[host]}/15", "dev", "eth0"])
            run(h + ["link", "set", "eth0", "up"])
            rate = self.rates.get(host)
            if rate or self.delay_ms:
                # Both directions: the host's egress, and the bridge port's egress towards it.
                for where, dev in ((ns, "eth0"), (self.bridge_ns, port)):
                    self.shape(where, dev, rate)

    def shape(self, ns, dev, rate):
        """Rate with a token bucket (tbf); delay, if asked, with netem as its parent."""
        cmd = ["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev]
        parent = ["root"]
        if self.delay_ms:
            delay = f"{self.delay_ms * self.time_dilation:g}ms"
            r = run(cmd + ["root", "handle", "1:", "netem", "delay", delay,
                           "limit", "10000"], check=False)
            if r.returncode != 0:
                raise ClusterError("--delay_ms needs the kernel's netem qdisc (sch_netem), which "
                                   f"this kernel does not offer: {r.stderr.strip()}")
            parent = ["parent", "1:1", "handle", "10:"]
        if rate:
            run(cmd + parent + ["tbf"] + tbf_options(rate, self.time_dilation))

    def cpu_quota(self, pid, fraction, name):
        """Limits `pid` (and its threads) to `fraction` of one CPU.

        A 10 ms period (the kernel's default is 100 ms) keeps the throttling fine-grained: a
        capped process cannot run at full speed for tens of milliseconds and then stall for as
        long. Shorter periods (down to the 1 ms minimum quota) were measured to cost r2sp
        throughput through throttling overhead (docs/RESULTS.md#heterogeneous-workers)."""
        period = 10000
        quota = max(1000, int(period * fraction))
        if _cgroup_v2_cpu():
            path = f"/sys/fs/cgroup/{self.tag}-{name}"
            os.makedirs(path, exist_ok=True)
            _write(os.path.join(path, "cpu.max"), f"{quota} {period}")
        else:
            path = f"/sys/fs/cgroup/cpu/{self.tag}-{name}"
            os.makedirs(path, exist_ok=True)
            _write(os.path.join(path, "cpu.cfs_period_us"), str(period))
            _write(os.path.join(path, "cpu.cfs_quota_us"), str(quota))
        _write(os.path.join(path, "cgroup.procs"), str(pid))
        self.cgroups.append(path)

    def link_bytes(self, host):
        """(bytes the host received, bytes it sent) on its link, read at the bridge port."""
        port = self.bridge_port(host)
        r = run(["ip", "netns", "exec", self.bridge_ns, "cat",
                 f"/sys/class/net/{port}/statistics/tx_bytes",
                 f"/sys/class/net/{port}/statistics/rx_bytes"], check=False)
        values = r.stdout.split()
        return (int(values[0]), int(values[1])) if len(values) == 2 else (0, 0)

    def down(self):
        for path in self.cgroups:
            for _ in range(50):  # processes leave a cgroup a moment after they exit
                try:
                    os.rmdir(path)
                    break
                except OSError:
                    time.sleep(0.1)
        self.cgroups = []
        for ns in reversed(self.created):
            # Kill anything still inside, then delete the namespace (and its veth ends).
            kill_processes(ns)
            run(["ip", "netns", "del", ns], check=False)
        self.created = []

    def self_check(self, sender, receiver, seconds=2.0):
        """Bulk TCP from `sender` to `receiver`; returns bits per second achieved."""
        port = 5201
        server = subprocess.Popen(
            self.exec_prefix(receiver) + ["python3", "-c", RECEIVER, self.addresses[receiver],
                                          str(port)],
            stdout=subprocess.PIPE, text=True)
        # Connect only once the receiver listens (a fixed sleep raced it on a loaded machine:
        # the sender was refused and the receiver waited forever).
        if server.stdout.readline().strip() != "listening":
            server.kill()
            raise ClusterError("self-check receiver did not start")
        client = subprocess.run(
            self.exec_prefix(sender) + ["python3", "-c", SENDER, self.addresses[receiver],
                                        str(port), str(seconds)],
            capture_output=True, text=True, timeout=seconds + 30)
        if client.returncode != 0:
            server.kill()
            server.wait()
            raise ClusterError(f"self-check sender failed: {client.stderr.strip()}")
        out, _ = server.communicate(timeout=30)
        received, elapsed = (float(x) for x in out.split())
        return received * 8 / elapsed


# The self-check's two ends: the receiver times from the first byte to the last.
RECEIVER = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
total, first = 0, None
while True:
    b = c.recv(1 << 20)
    if not b: break
    if first is None: first = time.time()
    total += len(b)
print(total, time.time() - first)
"""
SENDER = r"""
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
chunk = b"x" * (1 << 16); end = time.time() + float(sys.argv[3])
while time.time() < end: c.sendall(chunk)
c.close()
"""


def namespace_pids(ns):
    """The processes in network namespace `ns` ([] if there is none)."""
    return [int(pid) for pid in run(["ip", "netns", "pids", ns], check=False).stdout.split()
            if pid.isdigit()]


def kill_processes(ns, keep=()):
    """SIGKILL to every process in namespace `ns` except those named (comm) in `keep`."""
    for pid in namespace_pids(ns):
        try:
            if keep:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() in keep:
                        continue
            os.kill(pid, 9)
        except (ProcessLookupError, FileNotFoundError):
            pass


def cleanup_stale():
    """Deletes r2sp namespaces left behind by killed runs; returns how many."""
    names = [line.split()[0] for line in run(["ip", "netns", "list"], check=False).stdout.splitlines()
             if line.startswith(PREFIX)]
    for ns in names:
        kill_processes(ns)
        run(["ip", "netns", "del", ns], check=False)
    return len(names)

#!/usr/bin/env bash
# slurm_fixture.sh -- throwaway Slurm cluster on THIS machine (munged +
# slurmctld + N x slurmd) for automated tests.  No systemd, nothing is
# written outside DIR, non-default ports.
#
#   slurm_fixture.sh up   DIR   # create DIR, start daemons, wait for nodes idle
#   slurm_fixture.sh env  DIR   # print "export SLURM_CONF=DIR/slurm.conf"
#   slurm_fixture.sh down DIR   # cancel jobs, stop daemons, remove DIR
#
# Client commands (sinfo/sbatch/srun/salloc/scontrol/squeue/scancel) must be
# run with SLURM_CONF=DIR/slurm.conf; that is all they need (the munge socket
# path reaches them through AuthInfo= in slurm.conf).
#
# Requirements: root; Debian packages slurm-wlm (or slurmctld slurmd
# slurm-client) and munge.  Tested on Debian 12 with slurm-wlm
# 22.05.8-4+deb12u3 and munge 0.5.15-2+deb12u1 (no systemd, no cgroups).
#
# Tunables (environment):
#   SLURM_FIXTURE_NODES       (default 2)     number of slurmd "nodes".
#        1 -> one node named $(hostname -s) (the classic single-node setup).
#        N>1 -> nodes $(hostname -s)-1..N, all on this host, one slurmd each
#        (Debian's build has MULTIPLE_SLURMD=Yes).  >=2 is needed for
#        heterogeneous jobs: Slurm 22.05 schedules het jobs only in the
#        backfill scheduler, which reserves WHOLE nodes for each component,
#        so two components can never share one node -> they pend forever
#        with Reason=Resources on a 1-node cluster.
#   SLURM_FIXTURE_CTLD_PORT   slurmctld port; unset/"auto" (default) = pick
#                             a random free port in 20000-59999
#   SLURM_FIXTURE_SLURMD_PORT first slurmd port (node i uses port+i-1);
#                             unset/"auto" = CTLD_PORT+1
#   (Two fixtures on the same ports collide: slurmctld dies with
#    "fatal: slurm_init_msg_engine_port error Address already in use".)
#   SLURM_FIXTURE_TIMEOUT     (default 60)    seconds to wait for nodes idle
set -euo pipefail

NODES=${SLURM_FIXTURE_NODES:-2}
CTLD_PORT=${SLURM_FIXTURE_CTLD_PORT:-auto}
SLURMD_PORT=${SLURM_FIXTURE_SLURMD_PORT:-auto}
TIMEOUT=${SLURM_FIXTURE_TIMEOUT:-60}

die() { echo "slurm_fixture: $*" >&2; exit 1; }

# True if TCP port $1 is bound (any state) on this machine (IPv4 or IPv6).
port_in_use() {
  local hex; hex=$(printf ':%04X ' "$1")
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '{print $2" "}' |
    grep -qF -- "$hex"
}

# Choose CTLD_PORT/SLURMD_PORT if "auto": a run of NODES+1 free ports.
# (Check-then-bind is racy; a collision shows up as "slurmctld/slurmd died
#  during startup" with "Address already in use" in the logs.)
pick_ports() {
  local try base p ok
  if [[ $CTLD_PORT == auto ]]; then
    for ((try = 0; try < 50; try++)); do
      base=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
      ok=1
      for ((p = base; p <= base + NODES; p++)); do
        port_in_use "$p" && { ok=0; break; }
      done
      (( ok )) && break
    done
    (( ok )) || die "could not find free ports"
    CTLD_PORT=$base
  fi
  [[ $SLURMD_PORT != auto ]] || SLURMD_PORT=$(( CTLD_PORT + 1 ))
}

# Send TERM to the pids stored in the given pid files (all at once), wait up
# to 10 s for all of them to exit, then KILL the stragglers.
stop_pidfiles() {
  local f pid pids=() i alive
  for f in "$@"; do
    [[ -s $f ]] || continue
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
  done
  for ((i = 0; i < 100; i++)); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    (( alive )) || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}

# All descendants of pid $1 (depth first), one per line.
descendants() {
  local c
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$c"; descendants "$c"
  done
}

# Startup failed: show the logs, stop whatever was started (DIR is kept for
# inspection; 'down' removes it), exit 1.
fail_up() {
  dump_logs "$1"
  stop_all "$1" >/dev/null 2>&1 || true
  die "$2"
}

dump_logs() {
  local f
  for f in "$1"/log/*.log "$1"/log/munged.stdout; do
    [[ -f $f ]] || continue
    echo "==== $f (tail) ====" >&2
    tail -n 30 "$f" >&2
  done
}

node_names() {  # prints the NodeNames, one per line
  local host; host=$(hostname -s)
  if (( NODES == 1 )); then echo "$host"
  else for ((i = 1; i <= NODES; i++)); do echo "$host-$i"; done; fi
}

cmd_up() {
  local d=$1
  [[ $(id -u) == 0 ]] || die "must run as root"
  [[ ! -e $d ]] || die "$d already exists (run 'down' first)"
  for c in munged mungekey slurmctld slurmd sinfo; do
    command -v "$c" >/dev/null || die "$c not found; install slurm-wlm and munge"
  done
  (( NODES >= 1 )) || die "SLURM_FIXTURE_NODES must be >= 1"

  pick_ports
  mkdir -p "$d"
  d=$(cd "$d" && pwd -P)                  # absolute, symlink-free
  # AF_UNIX socket paths are limited to 107 bytes (munge socket, slurmd
  # spool sockets "<spool>/<node>/<node>_<jobid>.<stepid>").
  (( ${#d} < 60 )) || die "DIR path too long for unix sockets: $d"
  # munged refuses to start if the socket/key/log/pid dirs or their parents
  # are group/other-writable (sticky /tmp is accepted) and requires the socket
  # dir to be world-executable ("Socket is inaccessible: execute permissions
  # for all required on ...") -> everything 0755, only the key is private.
  chmod 0755 "$d"
  mkdir -p "$d"/{munge,log,run,state,spool}
  chmod 0755 "$d"/{munge,log,run,state,spool}

  # ---- munge ---------------------------------------------------------------
  # Fresh private key, owned by the user munged runs as (root), mode 0400.
  mungekey --create --keyfile="$d/munge/munge.key"
  chown root:root "$d/munge/munge.key"
  chmod 0400 "$d/munge/munge.key"
  # munged forks into the background itself and writes its pid file.  All
  # daemons get stdio redirected so a caller capturing our output through a
  # pipe (subprocess.run(capture_output=True)) sees EOF when we exit.
  # (Running it as root works; no --force needed.)
  munged --socket="$d/munge/munge.socket" \
         --key-file="$d/munge/munge.key" \
         --pid-file="$d/run/munged.pid" \
         --log-file="$d/log/munged.log" \
         --seed-file="$d/munge/munged.seed" \
         --num-threads=4 </dev/null >"$d/log/munged.stdout" 2>&1 ||
    fail_up "$d" "munged failed to start"

  # ---- slurm.conf ----------------------------------------------------------
  local host hw topo mem names=() n i
  host=$(hostname -s)
  mapfile -t names < <(node_names)
  # `slurmd -C` prints the detected hardware, e.g.
  #   NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105
  # Reuse the topology verbatim (a mismatch -> "Node reconfigured
  # socket/core boundaries" or a drained node).
  hw=$(slurmd -C | head -n1)
  topo=$(tr ' ' '\n' <<<"$hw" |
         grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' |
         paste -sd' ')
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  # Advertise less memory than detected so fluctuations never trigger
  # "Low RealMemory" and drain the node (memory is not a consumable here).
  mem=$(( mem * 9 / 10 ))

  {
    cat <<EOF
# Generated by slurm_fixture.sh -- everything lives under $d
ClusterName=fixture
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${CTLD_PORT}
SlurmdPort=${SLURMD_PORT}
SlurmUser=root
SlurmdUser=root

# munge: daemons AND clients use our private munged via this socket.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${d}/munge/munge.socket

# All state/log/pid files under DIR.  %n = node name (one slurmd per node).
StateSaveLocation=${d}/state
SlurmdSpoolDir=${d}/spool/%n
SlurmctldPidFile=${d}/run/slurmctld.pid
SlurmdPidFile=${d}/run/slurmd-%n.pid
SlurmctldLogFile=${d}/log/slurmctld.log
SlurmdLogFile=${d}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# Don't read /etc/slurm/plugstack.conf.
PlugStackConfig=${d}/plugstack.conf

# No cgroups (none usable without systemd): linuxproc tracking, no task
# binding/containment, no accounting/slurmdbd.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true

# CPU-granular allocation so several small jobs can share a node.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Het jobs are started ONLY by the backfill scheduler; run it every second
# and start a het job as soon as all its components fit.
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,bf_hetjob_immediate
ReturnToService=2
# Short timers so a test fixture reacts quickly.
SlurmdTimeout=30
InactiveLimit=0
# "sbatch --wait" polls every 2 s only while 2 < MinJobAge/2 is false; with
# the default (300) or 30 it backs off 2 s -> 8 s -> 32 s, so a 12 s job made
# "sbatch --wait" return after ~42 s.  Completed jobs stay visible in
# squeue/scontrol for >= MinJobAge s (until the next purge pass).
MinJobAge=4
KillWait=2

EOF
    for ((i = 0; i < ${#names[@]}; i++)); do
      echo "NodeName=${names[i]} NodeHostname=${host} NodeAddr=127.0.0.1" \
           "Port=$((SLURMD_PORT + i)) ${topo} RealMemory=${mem} State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$(paste -sd, < <(node_names))" \
         "Default=YES MaxTime=INFINITE State=UP"
  } >"$d/slurm.conf"
  : >"$d/plugstack.conf"
  # cgroup.conf is looked up next to slurm.conf; keep a harmless one there.
  echo "CgroupPlugin=autodetect" >"$d/cgroup.conf"
  for n in "${names[@]}"; do mkdir -p "$d/spool/$n"; done

  export SLURM_CONF="$d/slurm.conf"

  # ---- daemons -------------------------------------------------------------
  # -D keeps them in the foreground so we know their pids; setsid detaches
  # them from the caller's session.  stdout/err are dup'ed into *.stdout
  # (the real logs are the *.log files).
  setsid slurmctld -D -f "$SLURM_CONF" \
    >"$d/log/slurmctld.stdout" 2>&1 </dev/null &
  echo $! >"$d/run/slurmctld.fixture.pid"
  for n in "${names[@]}"; do
    setsid slurmd -D -N "$n" -f "$SLURM_CONF" \
      >"$d/log/slurmd-$n.stdout" 2>&1 </dev/null &
    echo $! >"$d/run/slurmd-$n.fixture.pid"
  done

  # ---- wait until every node is idle ----------------------------------------
  local t0=$SECONDS states="" f
  while (( SECONDS - t0 < TIMEOUT )); do
    for f in "$d"/run/*.fixture.pid; do
      kill -0 "$(<"$f")" 2>/dev/null ||
        fail_up "$d" "$(basename "$f" .fixture.pid) died during startup"
    done
    states=$(sinfo -h -N -o '%t' 2>/dev/null | sort | uniq -c | xargs || true)
    [[ $states == "$NODES idle" ]] && break
    sleep 0.2
  done
  [[ $states == "$NODES idle" ]] ||
    fail_up "$d" "nodes not idle after ${TIMEOUT}s (sinfo: '$states')"
  echo "slurm up ($NODES node(s)): export SLURM_CONF=$SLURM_CONF"
}

# Stop everything belonging to fixture dir $1 (absolute path); keeps files.
stop_all() {
  local d=$1 pid i
  # 1. Cancel all jobs and give slurmstepd a moment to kill the tasks
  #    (slurmd does NOT kill running steps when it is stopped).
  if [[ -f $d/slurm.conf ]] && [[ -s $d/run/slurmctld.fixture.pid ]] &&
     kill -0 "$(<"$d/run/slurmctld.fixture.pid")" 2>/dev/null; then
    export SLURM_CONF=$d/slurm.conf
    timeout 5 scancel --quiet --user=root 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      [[ -z $(timeout 2 squeue -h -t PD,R,CG,S -o %i 2>/dev/null) ]] && break
      sleep 0.2
    done
  fi
  # 2. slurmd(s) and slurmctld, in parallel (each needs ~1.5-3 s to exit).
  stop_pidfiles "$d"/run/*.fixture.pid
  # 3. Any slurmstepd still holding files under DIR (step survived scancel):
  #    kill it and its whole process tree -- linuxproc has no cgroup to sweep.
  for pid in $(pgrep -x slurmstepd || true); do
    if ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF -- "$d/"; then
      kill -KILL "$pid" $(descendants "$pid") 2>/dev/null || true
    fi
  done
  # 4. munged last (stepds talk to it while cleaning up).
  munged --socket="$d/munge/munge.socket" --stop >/dev/null 2>&1 ||
    stop_pidfiles "$d/run/munged.pid"
}

cmd_down() {
  local d=$1
  [[ -d $d ]] || return 0
  d=$(cd "$d" && pwd -P)
  stop_all "$d"
  rm -rf -- "$d"
}

case "${1:-}" in
  up)   [[ $# == 2 ]] || die "usage: $0 up DIR";   cmd_up "$2" ;;
  down) [[ $# == 2 ]] || die "usage: $0 down DIR"; cmd_down "$2" ;;
  env)  [[ $# == 2 ]] || die "usage: $0 env DIR"
        echo "export SLURM_CONF=$(cd "$2" && pwd -P)/slurm.conf" ;;
  *) die "usage: $0 {up|down|env} DIR" ;;
esac

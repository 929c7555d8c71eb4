#!/bin/bash
# EC2 user-data for one host of an R2SP job: tools/pylib/deploy/ec2_user_data.py fills in the settings
# below and tools/launch --backend=ec2 passes the result to run-instances. As a fresh instance
# it fetches and unpacks the release bundle, starts the host's processes with run_role, waits for
# them, uploads its run directory to RESULTS/JOB/RUN/HOST/ and then RESULTS/JOB/RUN/HOST.done
# (or HOST.failed when it could not start them, holding why), and powers off, which terminates
# the instance (the launcher starts it with --instance-initiated-shutdown-behavior terminate).
# As each process ends, whatever its status, RESULTS/JOB/RUN/NAME.exit-STATUS says so at once:
# a death is the launcher's to record (and to replace, with a new instance); the host's other
# processes go on. A replacement instance (HOST.r1) runs only the lost processes, under their
# replacements' names (worker1.r1), and joins the running job.
# Spot (spot=true): every R2SP_SPOT_POLL_S seconds (default 5) it reads the metadata's
# spot/instance-action; on an interruption notice (two minutes before AWS takes the instance) it
# sends SIGTERM to its servers (each checkpoints, and its run_role exits once that checkpoint
# is uploaded to the checkpoint_url), waits for them, then stops its workers and scheduler, and
# reports HOST.reclaimed instead of HOST.done, leaving no exit records for those it stopped:
# the launcher counts them dead and starts a replacement instance.
#
# URLs: s3://... (aws s3 cp with the instance profile's credentials), https://... (curl; the
# bundle only) or file:///path (tests). The advertised address is the instance's private IPv4
# address, read from the metadata service (IMDSv2): interface names differ between AMIs and
# instance types (ens5, eth0, several on p4d), the primary address does not.
# With --auth=curve, keys_url and key_files name this host's key files (the public keys and
# the secret keys of its roles, never in this text): fetched into $prefix/keys-JOB-RUN (0700,
# files 0600) before any process starts, never printed.
# With a [data] table (data_source set: hosts with workers) the bundle's stage_data fetches the
# data set into data_target (a leading ~: this user's home) and verifies it against
# data_manifest before any process starts; a failure is reported as HOST.failed, naming the URL.
# For tests: R2SP_PREFIX replaces /opt/r2sp, R2SP_ADVERTISE_HOST replaces the metadata
# service's address lookup, R2SP_IMDS_URL its URL (http://169.254.169.254), R2SP_NO_SHUTDOWN=1
# leaves the machine on.
set -uo pipefail

# @SETTINGS@

prefix="${R2SP_PREFIX:-/opt/r2sp}"
out="$prefix/runs/$job-$run"
mkdir -p "$out" || exit 1
exec >>"$out/user_data_$host.log" 2>&1
echo "user-data: $host of $job run $run starting at $(date -u +%FT%TZ)"

shutdown_unless_testing() {
  if [ "${R2SP_NO_SHUTDOWN:-0}" != 1 ]; then shutdown -h "$@"; fi
}

# A launcher that dies leaves nothing to terminate the instance: it powers itself off after the
# job's --timeout plus time to boot and install.
shutdown_unless_testing "+$lifetime_minutes" "r2sp: the job ran past its time limit"

fetch() {  # fetch URL FILE
  case "$1" in
    s3://*) aws s3 cp --only-show-errors "$1" "$2" ;;
    https://*|http://*) curl -fsSL --retry 5 -o "$2" "$1" ;;
    file://*) cp "${1#file://}" "$2" ;;
    *) echo "user-data: cannot fetch '$1'"; return 1 ;;
  esac
}

put() {  # put DIR_OR_FILE URL (a directory's contents go under URL/)
  case "$2" in
    s3://*)
      if [ -d "$1" ]; then aws s3 cp --only-show-errors --recursive "$1" "$2/"
      else aws s3 cp --only-show-errors "$1" "$2"; fi ;;
    file://*)
      if [ -d "$1" ]; then mkdir -p "${2#file://}" && cp -r "$1/." "${2#file://}/"
      else mkdir -p "$(dirname "${2#file://}")" && cp "$1" "${2#file://}"; fi ;;
    *) echo "user-data: cannot upload to '$2'"; return 1 ;;
  esac
}

imds="${R2SP_IMDS_URL:-http://169.254.169.254}"
imds_get() {  # imds_get PATH: prints the instance metadata at PATH (IMDSv2); fails without it
  local token
  token="$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$imds/latest/api/token")" &&
    curl -sf -H "X-aws-ec2-metadata-token: $token" "$imds/latest/meta-data/$1"
}

watcher=""  # the spot interruption watcher's pid
report() {  # report done|failed|reclaimed TEXT: uploads the run directory, then the marker; never returns
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null
  echo "user-data: $1: $2"
  put "$out" "$results/$host" || echo "user-data: uploading $out failed"
  printf '%s\n' "$2" >"$prefix/$host.$1"
  put "$prefix/$host.$1" "$results/$host.$1" || echo "user-data: uploading the marker failed"
  shutdown_unless_testing now
  exit 0
}

fail() { report failed "$*"; }

if [[ "$bundle_url" == s3://* || "$results" == s3://* || "$data_source" == s3://* ||
      "$checkpoint_url" == s3://* ]] &&
    ! command -v aws >/dev/null; then
  # Debian's images have no AWS CLI; the Deep Learning AMIs do.
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q awscli; } ||
    echo "user-data: cannot install the AWS CLI"
fi

advertise="${R2SP_ADVERTISE_HOST:-}"
if [ -z "$advertise" ]; then
  for _ in $(seq 30); do
    advertise="$(imds_get local-ipv4)" && break
    sleep 2
  done
fi
[ -n "$advertise" ] || fail "no private address from the instance metadata service"

tarball="$prefix/$bundle_name.tar.gz"
fetch "$bundle_url" "$tarball" || fail "cannot fetch the bundle from $bundle_url"
echo "$bundle_sha256  $tarball" | sha256sum -c --quiet - ||
  fail "the bundle at $bundle_url is not the launcher's (sha256 differs)"
rm -rf "${prefix:?}/$bundle_name"
tar xzf "$tarball" -C "$prefix" || fail "cannot unpack $tarball"
run_role="$prefix/$bundle_name/share/r2sp/deploy/run_role"

data_dir=""
if [ -n "$data_source" ]; then
  [ "$data_source" = bundle ] && data_source="file://$prefix/$bundle_name/worker_files/$data_name"
  home="${HOME:-$(getent passwd "$(id -un)" | cut -d: -f6)}"
  data_dir="$data_target"
  case "$data_dir" in "~") data_dir="$home" ;; "~/"*) data_dir="$home/${data_dir#"~/"}" ;; esac
  printf '%s' "$data_manifest" | "$prefix/$bundle_name/share/r2sp/deploy/stage_data" \
    --source="$data_source" --manifest=- --target="$data_dir" --host="$host" \
    >"$out/stage_data.log" 2>&1 || fail "$(cat "$out/stage_data.log")"
  echo "user-data: $(cat "$out/stage_data.log")"
fi

keys=""
if [ -n "$keys_url" ]; then
  keys="$prefix/keys-$job-$run"
  umask_was="$(umask)"
  umask 077  # the directory and every file the user's only from their creation on
  { rm -rf "$keys" && mkdir -p "$keys"; } || fail "cannot make $keys"
  for name in $key_files; do
    fetch "$keys_url/$name" "$keys/$name" || fail "cannot fetch the key file $name from $keys_url"
  done
  { chmod 700 "$keys" && chmod 600 "$keys"/*; } || fail "cannot restrict $keys to root"
  umask "$umask_was"
  echo "user-data: the job's keys for this host are in $keys"
fi

declare -A names=()  # pid -> process name
start() {  # start NAME RUN_ROLE_ARGS...
  local name="$1"
  shift
  "$run_role" "$@" >"$out/$name.log" 2>&1 </dev/null &
  names[$!]="$name"
  echo "user-data: started $name (pid $!)"
}
start_processes

said_exit() {  # said_exit NAME STATUS: RESULTS/NAME.exit-STATUS, at once
  { : >"$prefix/$1.exit-$2" && put "$prefix/$1.exit-$2" "$results/$1.exit-$2"; } ||
    echo "user-data: uploading the exit record of $1 failed"
}

stop_for_reclaim() {  # stop_for_reclaim NOTICE: servers, then workers, then the scheduler
  local role pid pids
  echo "user-data: spot interruption notice ($1): stopping the servers, then the others"
  : >"$prefix/reclaiming"
  for role in server worker scheduler; do
    pids=()
    for pid in "${!names[@]}"; do [[ "${names[$pid]}" == "$role"* ]] && pids+=("$pid"); done
    [ ${#pids[@]} -gt 0 ] || continue
    kill -TERM "${pids[@]}" 2>/dev/null
    # A server's run_role exits once its SIGTERM checkpoint is uploaded: at most 90 s of the
    # notice's 120 for them.
    for _ in $(seq 900); do kill -0 "${pids[@]}" 2>/dev/null || break; sleep 0.1; done
  done
}

watch_interruption() {
  local notice
  while sleep "${R2SP_SPOT_POLL_S:-5}"; do
    notice="$(imds_get spot/instance-action)" && { stop_for_reclaim "$notice"; return; }
  done
}
if [ "$spot" = true ]; then
  watch_interruption &
  watcher=$!
fi

# Waits for every process, saying each one's end (none after an interruption notice).
statuses=""
while [ "${#names[@]}" -gt 0 ]; do
  pid=""
  wait -n -p pid
  status=$?
  [ -n "$pid" ] || break
  [ "$pid" = "$watcher" ] && continue
  name="${names[$pid]}"
  unset "names[$pid]"
  statuses+="$name exited with status $status; "
  [ -e "$prefix/reclaiming" ] || said_exit "$name" "$status"
done
if [ -e "$prefix/reclaiming" ]; then report reclaimed "$statuses"; fi
report done "$statuses"

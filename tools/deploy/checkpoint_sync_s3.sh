# checkpoint_sync's s3:// half (sourced by it; see its header): up and down through the AWS CLI.
# Uses checkpoint_sync's dir, url, KEEP, tmp and manifest_files.
# shellcheck shell=bash

declare -A at_url=()  # "server<R>/ckpt-<N>" -> 1: complete at the URL (its MANIFEST there)
listed=0

# s3_keys_under URL: "SIZE KEY" of every object under URL/, the key relative to it.
s3_keys_under() {
  local bucket_key="${1#s3://}"
  local key="${bucket_key#*/}"
  aws s3 ls --recursive "$1/" 2>/dev/null | awk -v p="$key/" '
    {k = $0; sub(/^[^ ]+ +[^ ]+ +[0-9]+ /, "", k); if (index(k, p) == 1) print $3, substr(k, length(p) + 1)}'
}

# s3_list: fills at_url from the URL (once per run: later changes are this process's own).
s3_list() {
  local size key
  [ "$listed" = 1 ] && return 0
  while read -r size key; do
    case "$key" in server*/ckpt-*/MANIFEST) at_url[${key%/MANIFEST}]=1 ;; esac
  done < <(s3_keys_under "$url")
  listed=1
}

# s3_sizes_match MANIFEST URL: every file MANIFEST lists is at URL/ with the listed size.
s3_sizes_match() {
  local name size found
  found="$(s3_keys_under "$2")"
  while read -r name size; do
    grep -qxF "$size $name" <<<"$found" || return 1
  done < <(manifest_files "$1")
}

# s3_upload CKPT URL: its files, checked at the URL, then its MANIFEST.
s3_upload() {
  local name size
  while read -r name size; do
    aws s3 cp --only-show-errors "$1/$name" "$2/$name" || return 1
  done < <(manifest_files "$1/MANIFEST")
  s3_sizes_match "$1/MANIFEST" "$2" && aws s3 cp --only-show-errors "$1/MANIFEST" "$2/MANIFEST"
}

# newest_local SERVER_DIR: the newest KEEP complete checkpoints of one server, oldest first.
newest_local() {
  local ckpt
  for ckpt in "$1"/ckpt-*; do [ -f "$ckpt/MANIFEST" ] && basename "$ckpt"; done | sort | tail -n $KEEP
}

s3_prune() {  # s3_prune SERVER: deletes its checkpoints at the URL but the newest KEEP
  local name
  for name in $(printf '%s\n' "${!at_url[@]}" | grep "^$1/" | sort | head -n -$KEEP); do
    aws s3 rm --recursive --only-show-errors "$url/$name/" && unset "at_url[$name]"
  done
}

s3_up() {
  local server_dir server name
  for server_dir in "$dir"/server*; do
    [ -d "$server_dir" ] || continue
    server=$(basename "$server_dir")
    for name in $(newest_local "$server_dir"); do
      [ -n "${at_url[$server/$name]:-}" ] && continue
      s3_list
      [ -n "${at_url[$server/$name]:-}" ] && continue
      if s3_upload "$server_dir/$name" "$url/$server/$name"; then
        at_url[$server/$name]=1
        echo "checkpoint_sync: $server_dir/$name -> $url/$server/$name"
        s3_prune "$server"
      else
        echo "checkpoint_sync: copying $server_dir/$name to $url/$server/ failed; left out" >&2
        aws s3 rm --recursive --only-show-errors "$url/$server/$name/" >/dev/null 2>&1
      fi
    done
  done
}

# s3_down: every checkpoint complete at the URL that DIR lacks, sizes checked, renamed in.
s3_down() {
  local entry server name target
  s3_list
  for entry in $(printf '%s\n' "${!at_url[@]}" | sort); do
    server=${entry%%/*} name=${entry#*/} target="$dir/$entry"
    [ -d "$target" ] && continue
    mkdir -p "$dir/$server" || return 0
    tmp="$dir/$server/.tmp-$name-$(hostname)-$$"
    # Another server's run_role on this host may take the same one at once: theirs is as good.
    if aws s3 cp --only-show-errors --recursive "$url/$entry/" "$tmp/" &&
        local_sizes_match "$tmp" && { mv -T "$tmp" "$target" 2>/dev/null || [ -d "$target" ]; }; then
      echo "checkpoint_sync: $url/$entry -> $target"
      rm -rf "$tmp"
    else
      echo "checkpoint_sync: copying $url/$entry to $dir/$server/ failed; left out" >&2
      rm -rf "$tmp"
    fi
    tmp=""
  done
}

# local_sizes_match CKPT: every file its MANIFEST lists is there, of the listed size.
local_sizes_match() {
  local name size
  [ -f "$1/MANIFEST" ] || return 1
  while read -r name size; do
    [ "$(stat -c %s "$1/$name" 2>/dev/null)" = "$size" ] || return 1
  done < <(manifest_files "$1/MANIFEST")
}

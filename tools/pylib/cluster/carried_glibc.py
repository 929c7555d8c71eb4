"""The release bundle's own C library, for hosts whose glibc is older than its programs need.

The programs are built on Debian 12 (glibc 2.36; the bundled libstdc++ alone needs 2.36). The
bundle carries that glibc in lib/glibc/, off every RPATH, and its ELF programs in libexec/;
bin/NAME is a POSIX sh wrapper that runs libexec/NAME natively where the host's glibc is new
enough (MANIFEST.json glibc_native), else through the carried loader:
  lib/glibc/ld-linux-x86-64.so.2 --library-path lib/glibc:lib[:$LD_LIBRARY_PATH]:HOST_DIRS libexec/NAME
R2SP_CARRIED_GLIBC=auto (default) | always | never overrides the choice. The old-base test
(tests/tools/pylib/cluster/old_glibc_test.py) runs the wrappers in a bullseye (glibc 2.31) root
file system, which is the floor the bundle promises (PROMISED_FLOOR, MANIFEST.json glibc_min).

check_floor() is what tools/package checks before it writes MANIFEST.json: every ELF file's
need within what the bundle promises."""

import os
import re
import shutil

from . import glibc_needs

CARRIED_DIR = os.path.join("lib", "glibc")
PROGRAM_DIR = "libexec"
LOADER = "ld-linux-x86-64.so.2"
# The oldest glibc the carried path is tested on (Debian 11, bullseye): MANIFEST.json glibc_min.
PROMISED_FLOOR = "2.31"
# Every shared library of Debian's libc6 package (one glibc: the carried libc must never meet a
# host's libpthread or libdl of another version), and GCC's libgcc_s, which the bundled
# libstdc++ needs in a version an old host may lack. Not its gconv modules or locales.
CARRIED = re.compile(
    r"^(ld-linux-x86-64\.so\.2|lib(c|m|mvec|pthread|dl|rt|resolv|util|anl|BrokenLocale|"
    r"thread_db|c_malloc_debug|nss_(files|dns|compat|hesiod))\.so\.\d+|libgcc_s\.so\.1)$")
# Searched last: where the RHEL family (Amazon Linux) keeps its libraries, which Debian's loader
# finds only through the host's /etc/ld.so.cache (Debian's own directories it searches anyway).
HOST_DIRS = "/lib64:/usr/lib64"
REQUIRED = ("ld-linux-x86-64.so.2", "libc.so.6", "libgcc_s.so.1")

WRAPPER = """#!/bin/sh
# R2SP release bundle: runs libexec/{name} natively where this host's C library is glibc {native}
# or newer, else through the bundle's own glibc (lib/glibc/, docs/DEPLOY.md).
# R2SP_CARRIED_GLIBC=auto (default: by the host's version) | always | never.
self="$(readlink -f "$0")" || exit 127
bundle="${{self%/*/*}}"
program="$bundle/libexec/{name}"
case "${{R2SP_CARRIED_GLIBC:-auto}}" in
  never) exec "$program" "$@" ;;
  always) ;;
  auto)
    host="$(getconf GNU_LIBC_VERSION 2>/dev/null)"
    host="${{host#glibc }}"
    case "$host" in
      [0-9]*.[0-9]*)
        major="${{host%%.*}}" minor="${{host#*.}}"
        minor="${{minor%%[!0-9]*}}"
        if [ "$major" -gt {major} ] || {{ [ "$major" -eq {major} ] && [ "${{minor:-0}}" -ge {minor} ]; }}; then
          exec "$program" "$@"
        fi ;;
    esac ;;
  *) echo "{name}: R2SP_CARRIED_GLIBC must be auto, always or never, not '$R2SP_CARRIED_GLIBC'" >&2
     exit 2 ;;
esac
exec "$bundle/lib/glibc/{loader}" \\
  --library-path "$bundle/lib/glibc:$bundle/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}:{host_dirs}" \\
  --argv0 "$program" "$program" "$@"
"""


def wrapper(name, native):
    """The text of bin/NAME for libexec/NAME, whose native need is glibc `native` ('x.y')."""
    major, minor = glibc_needs.version_key(native)
    return WRAPPER.format(name=name, native=native, major=major, minor=minor, loader=LOADER,
                          host_dirs=HOST_DIRS)


def write_wrapper(bin_dir, name, native):
    """bin_dir/NAME: the wrapper of libexec/NAME, executable."""
    os.makedirs(bin_dir, exist_ok=True)
    path = os.path.join(bin_dir, name)
    with open(path, "w") as f:
        f.write(wrapper(name, native))
    os.chmod(path, 0o755)


def c_library_dir(loaded):
    """The directory of the libc.so.6 in `loaded` ({soname: path}, every library ldd lists for
    the programs), whose glibc the bundle carries; BundleError-worthy ValueError if none."""
    if "libc.so.6" not in loaded:
        raise ValueError("the programs load no libc.so.6 (ldd); cannot carry a C library")
    return os.path.dirname(os.path.realpath(loaded["libc.so.6"]))


def carry(target, source_dir):
    """Copies glibc's libraries (CARRIED) from `source_dir` into `target`; returns the carried
    glibc's version ('x.y', the newest version libc.so.6 defines). ValueError naming a required
    file that `source_dir` lacks."""
    names = sorted(n for n in os.listdir(source_dir) if CARRIED.match(n))
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise ValueError(f"{source_dir} has no {', '.join(missing)}: cannot carry its glibc")
    os.makedirs(target)
    for name in names:
        shutil.copyfile(os.path.join(source_dir, name), os.path.join(target, name))
        os.chmod(os.path.join(target, name), 0o755)
    return glibc_needs.newest([os.path.join(target, "libc.so.6")])


def check_floor(bundle_dir, promise, carried):
    """Problems (strings, [] when none) with a bundle that promises to run on glibc `promise`:
    an ELF file outside lib/glibc that needs a newer glibc than the carried one (`carried`,
    'x.y'), or, when nothing is carried (''), than `promise`; and, when a C library is carried,
    an ELF program left in bin/, which a host older than its need could not start."""
    limit, what = (carried, "the carried C library's") if carried else (promise, "the promised")
    problems = []
    for rel, need in sorted(glibc_needs.needs(bundle_dir, skip=CARRIED_DIR).items()):
        if need and glibc_needs.version_key(need) > glibc_needs.version_key(limit):
            problems.append(f"{rel} needs glibc {need}, newer than {what} {limit}")
        if carried and os.path.dirname(rel) == "bin":
            problems.append(f"{rel} is an ELF program in bin/: a host older than glibc {need} "
                            "cannot start it (it belongs in libexec/, behind a wrapper)")
    return problems

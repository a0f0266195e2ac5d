#!/usr/bin/env python3
"""deploy/seccomp/inferencecache-io-uring.json lets the real server run on io_uring.

Usage: check_seccomp.py SOURCE_ROOT SERVER_BINARY

Run by Debian's python3 (python3-seccomp). The profile is in the OCI runtime-spec form that both
containerd (which reads a Localhost profile straight into the runtime spec, silently ignoring
Docker-only fields such as `includes`, `excludes` and `archMap`) and Docker read the same way. It is
compiled as runc does for this machine's architecture (every entry applies; system calls this
architecture lacks are skipped), loaded with libseccomp in the child before it execs the server,
and:

- under the profile, the server starts, /readyz answers 200, every core's ring is an io_uring
  (`inferencecache_core_io_uring_setup_flags` > 0 on every core) and SIGTERM ends it with exit 0;
- under the same profile without its io_uring entry (what containerd >= 2.0 and Docker >= 25 apply
  as RuntimeDefault) a server that has `--reactor-backend` starts on epoll (flags 0) and exits 0 on
  SIGTERM; an older server without that flag is reported as a skipped case.

The profile's own shape is checked too: only runtime-spec fields (nothing a runtime could ignore
and so allow more than written), default action EPERM, io_uring_setup/enter/register allowed by
exactly one entry, and nothing that the runtime default allows only to a container with
capabilities (no mount, no unshare, no bpf, no setns): the pods drop every capability.
"""
import errno
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import seccomp
except ImportError:
    print("SKIP: python3-seccomp is not installed (tools/install-deps.sh installs it)")
    sys.exit(77)

from deploy_common import CheckFailed, flags_of, require, run_checks

SRC, SERVER = sys.argv[1], sys.argv[2]
PROFILE = os.path.join(SRC, "deploy", "seccomp", "inferencecache-io-uring.json")
with open(PROFILE, encoding="utf-8") as f:
    DOC = json.load(f)
IO_URING = {"io_uring_setup", "io_uring_enter", "io_uring_register"}
NATIVE_ARCH = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}.get(platform.machine())
OPS = {"SCMP_CMP_EQ": seccomp.EQ, "SCMP_CMP_NE": seccomp.NE, "SCMP_CMP_LT": seccomp.LT,
       "SCMP_CMP_LE": seccomp.LE, "SCMP_CMP_GT": seccomp.GT, "SCMP_CMP_GE": seccomp.GE,
       "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ}
# The fields of the runtime spec's LinuxSeccomp and LinuxSyscall.
SPEC_FIELDS = {"defaultAction", "defaultErrnoRet", "architectures", "flags", "listenerPath",
               "listenerMetadata", "syscalls"}
SYSCALL_FIELDS = {"names", "action", "errnoRet", "args"}


def action_of(entry):
    if entry["action"] == "SCMP_ACT_ALLOW":
        return seccomp.ALLOW
    require(entry["action"] == "SCMP_ACT_ERRNO", "unexpected action %s" % entry["action"])
    return seccomp.ERRNO(entry.get("errnoRet", DOC.get("defaultErrnoRet", errno.EPERM)))


def args_of(entry):
    out = []
    for a in entry.get("args") or []:
        if a["op"] == "SCMP_CMP_MASKED_EQ":
            out.append(seccomp.Arg(a["index"], seccomp.MASKED_EQ, a["value"], a.get("valueTwo", 0)))
        else:
            out.append(seccomp.Arg(a["index"], OPS[a["op"]], a["value"]))
    return out


def build_filter(without=frozenset()):
    """The profile as a libseccomp filter, system calls in `without` left to the default action."""
    require(DOC["defaultAction"] == "SCMP_ACT_ERRNO", "default action %s" % DOC["defaultAction"])
    filt = seccomp.SyscallFilter(defaction=seccomp.ERRNO(DOC.get("defaultErrnoRet", errno.EPERM)))
    for entry in DOC["syscalls"]:
        for name in entry["names"]:
            if name in without:
                continue
            try:
                filt.add_rule(action_of(entry), name, *args_of(entry))
            except (RuntimeError, ValueError, OSError):
                pass  # not a system call of this architecture: runc skips it too
    return filt


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


def run_server_under(filt, extra_args=()):
    """Starts the server under `filt`, waits for /readyz 200 (at most 20 s), returns
    (io_uring setup flags per core, exit status after SIGTERM, its stderr)."""
    grpc, http, control = free_port(), free_port(), free_port()
    argv = [SERVER, "--grpc-bind-address", "127.0.0.1:%d" % grpc,
            "--http-bind-address", "127.0.0.1:%d" % http,
            "--snapshot-bind-address", "127.0.0.1:%d" % control,
            "--threads", "2", "--pin-threads=false", "--log-format", "text"] + list(extra_args)
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=filt.load)

        def stderr():
            log.seek(0)
            return log.read()

        try:
            deadline = time.monotonic() + 20
            while http_get(http, "/readyz")[0] != 200:
                if proc.poll() is not None:
                    raise CheckFailed("the server exited with status %s before it was ready:\n%s"
                                      % (proc.returncode, stderr()))
                require(time.monotonic() < deadline, "no /readyz 200 within 20 s")
                time.sleep(0.05)
            status, metrics = http_get(http, "/metrics")
            require(status == 200, "/metrics answered %s" % status)
            flags = {m.group(1): int(float(m.group(2))) for m in re.finditer(
                r'^inferencecache_core_io_uring_setup_flags\{core="(\d+)"\} (\S+)$', metrics, re.M)}
            proc.terminate()
            proc.wait(timeout=30)
            return flags, proc.returncode, stderr()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def check_profile_shape():
    require(set(DOC) <= SPEC_FIELDS, "fields a runtime may ignore: %s" % sorted(set(DOC) - SPEC_FIELDS))
    for entry in DOC["syscalls"]:
        extra = set(entry) - SYSCALL_FIELDS
        require(not extra, "containerd ignores %s (entry %s)" % (sorted(extra), entry["names"][:3]))
    require(NATIVE_ARCH in DOC.get("architectures", []), "no %s in architectures" % NATIVE_ARCH)
    holders = [e for e in DOC["syscalls"] if IO_URING & set(e["names"])]
    require(len(holders) == 1 and set(holders[0]["names"]) == IO_URING
            and holders[0]["action"] == "SCMP_ACT_ALLOW" and not holders[0].get("args"),
            "io_uring must be one unconditional entry: %s" % holders)
    require(DOC.get("defaultErrnoRet") == errno.EPERM, "defaultErrnoRet should be EPERM")
    allowed = {n for e in DOC["syscalls"] if e["action"] == "SCMP_ACT_ALLOW" for n in e["names"]}
    forbidden = {"mount", "umount2", "unshare", "setns", "bpf", "kexec_load", "init_module",
                 "reboot", "perf_event_open", "clone3", "keyctl", "add_key", "open_by_handle_at",
                 "chroot", "settimeofday", "iopl", "syslog"}
    leaked = sorted(allowed & forbidden)
    require(not leaked, "allowed although the runtime default needs a capability for it: %s" % leaked)
    clone = [e for e in DOC["syscalls"] if "clone" in e["names"]]
    require(clone and all(e.get("args") for e in clone), "clone must stay limited to no namespaces")


def check_server_runs_on_io_uring_under_the_profile():
    flags, status, err = run_server_under(build_filter())
    require(flags and all(v > 0 for v in flags.values()),
            "not every core runs io_uring under the profile: %s" % flags)
    require(status == 0, "exit status %s after SIGTERM (want 0):\n%s" % (status, err))
    print("     io_uring setup flags per core: %s" % flags)


def check_server_runs_under_the_runtime_default():
    if "--reactor-backend" not in flags_of(SERVER):
        print("     skipped: this server has no --reactor-backend (no epoll fallback yet)")
        return
    flags, status, err = run_server_under(build_filter(without=IO_URING))
    require(all(v == 0 for v in flags.values()),
            "io_uring flags under a profile that refuses io_uring: %s" % flags)
    require(status == 0, "exit status %s after SIGTERM (want 0):\n%s" % (status, err))


run_checks([check_profile_shape, check_server_runs_on_io_uring_under_the_profile,
            check_server_runs_under_the_runtime_default])

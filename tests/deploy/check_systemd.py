#!/usr/bin/env python3
"""`systemd-analyze verify` accepts deploy/systemd/inferencecache.service, warnings included.

Usage: check_systemd.py SOURCE_ROOT SYSTEMD_ANALYZE SERVER_BINARY OUT_DIR

verify checks that ExecStart's binary exists, so a copy of the unit with this build's server in
place of /usr/local/bin/inferencecache-server is verified. systemd only warns (exit 0) on unknown
keys or bad values, so any line of output that names the unit fails the check too. The flags of
ExecStart must exist in the server's --help.

No restart loop on a configuration error: the server exits 2 on a bad flag (run here), which
RestartPreventExitStatus=2 keeps from restarting, and other failures are restarted at most
StartLimitBurst times within StartLimitIntervalSec (both in [Unit], where systemd reads them).
"""
import os
import shlex
import subprocess
import sys

from deploy_common import flag_names, flags_of, require, run_checks

SRC, ANALYZE, SERVER, OUT = sys.argv[1:5]
UNIT = os.path.join(SRC, "deploy", "systemd", "inferencecache.service")
INSTALLED_PATH = "/usr/local/bin/inferencecache-server"
with open(UNIT, encoding="utf-8") as f:
    TEXT = f.read()


def exec_start():
    joined = TEXT.replace("\\\n", " ")
    line = next(l for l in joined.splitlines() if l.startswith("ExecStart="))
    return shlex.split(line.split("=", 1)[1])


def check_systemd_analyze_verify():
    require(INSTALLED_PATH in TEXT, "ExecStart should run " + INSTALLED_PATH)
    os.makedirs(OUT, exist_ok=True)
    copy = os.path.join(OUT, "inferencecache.service")
    with open(copy, "w", encoding="utf-8") as f:
        f.write(TEXT.replace(INSTALLED_PATH, os.path.abspath(SERVER)))
    r = subprocess.run([ANALYZE, "verify", copy], capture_output=True, text=True, check=False)
    noise = [l for l in (r.stdout + r.stderr).splitlines() if "inferencecache" in l]
    require(r.returncode == 0 and not noise, "systemd-analyze verify (exit %d):\n%s"
            % (r.returncode, r.stdout + r.stderr))


def check_exec_start_flags_exist():
    argv = exec_start()
    require(argv[0] == INSTALLED_PATH, "ExecStart runs %s" % argv[0])
    unknown = sorted(set(flag_names(argv[1:])) - flags_of(SERVER))
    require(not unknown, "ExecStart passes flags the server does not have: %s" % unknown)
    require("--insecure-disable-auth" not in argv, "the unit must not disable control auth")


def check_hardening():
    for key in ("DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict",
                "SystemCallFilter=@system-service", "RestartPreventExitStatus=2"):
        require(key in TEXT.splitlines(), "missing %s" % key)


def section(name):
    """{key: [values]} of one [Section] of the unit."""
    out, current = {}, None
    for line in TEXT.replace("\\\n", " ").splitlines():
        if line.startswith("["):
            current = line.strip()
        elif current == "[%s]" % name and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def check_no_restart_loop_on_configuration_error():
    r = subprocess.run([SERVER, "--no-such-flag"], capture_output=True, text=True, timeout=30,
                       check=False)
    require(r.returncode == 2, "the server exits %d on a bad flag; the unit assumes 2" % r.returncode)
    service, unit = section("Service"), section("Unit")
    require(service.get("Restart") == ["on-failure"], "Restart=%s" % service.get("Restart"))
    require(service.get("RestartPreventExitStatus") == ["2"], "RestartPreventExitStatus")
    require(unit.get("StartLimitBurst") == ["5"] and unit.get("StartLimitIntervalSec") == ["10min"],
            "[Unit] should limit restarts: StartLimitBurst=5, StartLimitIntervalSec=10min")
    require(not {"StartLimitBurst", "StartLimitIntervalSec"} & set(service),
            "StartLimit* belong in [Unit]")


run_checks([check_systemd_analyze_verify, check_exec_start_flags_exist, check_hardening,
            check_no_restart_loop_on_configuration_error])

#!/usr/bin/env python3
"""The "Starting NATS with JetStream" recipe of docs/replication.md runs as written.

Usage: check_nats_recipe.py SOURCE_ROOT SERVER_BINARY NATS_SERVER

The first indented code block under that heading is taken verbatim and sourced by bash, in a
fresh temporary directory, with this build's inferencecache-server and Debian's nats-server first
on PATH, inside a private network namespace (`unshare -rn`, loopback only), so the recipe's fixed
ports (4222, and the server's defaults 9090, 8080, 8081) collide with nothing on this machine.
The recipe's last command prints /readyz; its output must say the server is ready and connected
to the stream. The server is then stopped with SIGTERM and must exit 0; nats-server after it. Skips (77) where unprivileged user namespaces are not available.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC, SERVER, NATS = sys.argv[1], sys.argv[2], sys.argv[3]
DOC = os.path.join(SRC, "docs", "replication.md")
HEADING = "## Starting NATS with JetStream"

# Sourced by bash inside the namespace: loopback up, the recipe, then stop what it started in
# the background (SIGTERM) and report the server's exit status.
WRAPPER = r"""
set -e
ip link set lo up
. ./recipe.sh
echo
set +e
status=none
for pid in $(jobs -p); do
  if tr "\\0" " " </proc/$pid/cmdline | grep -q "^inferencecache-server "; then
    kill -TERM "$pid"; wait "$pid"; status=$?
  fi
done
kill -TERM $(jobs -p) 2>/dev/null
wait
echo "server exit status after SIGTERM: $status"
"""


def recipe():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    if HEADING not in text:
        sys.exit("docs/replication.md has no %r section" % HEADING)
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    m = re.search(r"((?:\n {4}\S.*)+)", section)
    if not m:
        sys.exit("no indented code block under %r" % HEADING)
    return "\n".join(line[4:] for line in m.group(1).strip("\n").splitlines()) + "\n"


def main():
    if not shutil.which("ip"):
        print("SKIP: no ip(8) (iproute2) to bring up the namespace's loopback")
        return 77
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-rn", "true"], capture_output=True, check=False).returncode != 0:
        print("SKIP: no private network namespace (unshare -rn) here")
        return 77
    script = recipe()
    print("recipe:\n" + script)
    required = ("nats-server --jetstream", "inferencecache-server --nats-url", "/readyz")
    for word in required:
        if word not in script:
            print("FAIL: the recipe no longer contains %r" % word)
            return 1
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(SERVER)),
                                   os.path.dirname(os.path.abspath(NATS)), env.get("PATH", "")])
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "recipe.sh"), "w", encoding="utf-8") as f:
            f.write(script)
        r = subprocess.run(["unshare", "-rn", "bash", "-c", WRAPPER], cwd=tmp, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
        print(r.stdout)
        lines = r.stdout.splitlines()
        problems = []
        if r.returncode != 0:
            problems.append("the recipe exited %d:\n%s" % (r.returncode, r.stderr[-3000:]))
        if "ok" not in lines:
            problems.append("/readyz did not say ok")
        if not any(l.startswith("replication: connected, stream INFERENCECACHE") for l in lines):
            problems.append("/readyz does not show the stream connected")
        if "server exit status after SIGTERM: 0" not in lines:
            problems.append("the server did not exit 0 on SIGTERM:\n" + r.stderr[-3000:])
        if not os.path.isdir(os.path.join(tmp, "nats-data", "jetstream")):
            problems.append("nats-server kept no JetStream store in ./nats-data")
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


sys.exit(main())

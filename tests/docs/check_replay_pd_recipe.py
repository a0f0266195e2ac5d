#!/usr/bin/env python3
"""tools/README.md "P/D mode": its three lines run as written against a server of this build.

Usage: check_replay_pd_recipe.py SOURCE_ROOT BUILD_ROOT

The section's first indented block is the recipe (write the topology, start the server in the
background, replay against it), its second the two rows the text says every machine prints. The
lines run in bash, in that order, in a temporary directory whose `tests` is the source tree's (the
trace the replay reads by default), with this build's replay and server first on PATH, inside a
private network namespace (`unshare -rn`, loopback only: the server's default ports collide with
nothing). Between the server line and the replay the check waits until the server's gRPC port
accepts (a person typing the lines does the same). Asserted: the topology line exits 0 and writes
its policy document; the replay exits 0, prints a row for each of its three policies, the two rows
of the text character for character (those policies are simulated in the replay, so their figures
do not depend on the machine), and the server's answers (answered_problems: a replica named for at
least 90 % of the requests, pairs among them, no failed call); the server exits 0 on SIGTERM. After 200 s the whole session (shell, server, replay) is killed. Skips
(77) where user namespaces are refused or `ip` is missing.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

from section_blocks import section_blocks

SRC, BUILD = sys.argv[1], sys.argv[2]
SECTION = "### P/D mode"
POLICIES = ("full-knowledge", "decode-first", "inferencecache")

# Runs inside the namespace: RECIPE_1..3 are the recipe's lines.
WRAPPER = r"""
set -u
ip link set lo up
bash -c "$RECIPE_1"
echo "=== topology exit $?"
{ eval "$RECIPE_2"; } >server.log 2>&1
server=$!
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/$SERVER_HOST/$SERVER_PORT") 2>/dev/null && break
  sleep 0.2
done
bash -c "$RECIPE_3" 2>&1
echo "=== replay exit $?"
kill -TERM "$server"
wait "$server"
echo "=== server stopped $?"
"""


def recipe():
    with open(os.path.join(SRC, "tools", "README.md"), encoding="utf-8") as f:
        text = f.read()
    found = section_blocks(text, SECTION) or []
    return (found[0], found[1]) if len(found) >= 2 else (None, None)


def answered_problems(printed, requests):
    """The server's answers: every request answered with a replica (DISAGGREGATED or decode-only,
    at least 90 %, some of them pairs), no error, at most 10 % fallbacks to decode-first."""
    line = next((l for l in printed if l.startswith("inferencecache reasons: ")), None)
    if line is None:
        return ["no inferencecache reasons line: the server answered nothing"]
    counts = {k: int(v) for k, v in re.findall(r"(?<![:\w])([A-Z_]+)=(\d+)", line)}
    problems = []
    named = sum(counts.get(k, 0) for k in ("DISAGGREGATED", "DECODE_ONLY_SHORT",
                                           "DECODE_ONLY_CACHED"))
    if counts.get("DISAGGREGATED", 0) == 0 or named < 0.9 * requests:
        problems.append("the server named a replica for %d of %d requests (%s)"
                        % (named, requests, line))
    if "error:" in line:
        problems.append("calls failed: %s" % line)
    fallbacks = re.search(r"fallbacks to decode-first: (\d+)", line)
    if not fallbacks or int(fallbacks.group(1)) > 0.1 * requests:
        problems.append("too many fallbacks to decode-first: %s" % line)
    return problems


def main():
    lines, rows = recipe()
    if lines is None or len(lines) != 3:
        print("expected a three-line recipe and its rows in %r of tools/README.md" % SECTION)
        return 1
    if not (lines[0].startswith("inferencecache-replay --pd ") and "--pd-topology-out" in lines[0]
            and lines[1].startswith("inferencecache-server ") and lines[1].endswith("&")
            and lines[2].startswith("inferencecache-replay --pd ") and "--server" in lines[2]):
        print("the recipe is not topology, server &, replay: %r" % lines)
        return 1
    if not shutil.which("ip"):
        print("SKIP: no `ip` (iproute2) to bring up the namespace's loopback")
        return 77
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-rn", "true"], capture_output=True, check=False).returncode != 0:
        print("SKIP: no private network namespace (unshare -rn) here")
        return 77
    build = os.path.abspath(BUILD)
    env = dict(os.environ, PATH=os.pathsep.join(
        [os.path.join(build, "tools", "replay"), os.path.join(build, "src"), os.environ["PATH"]]))
    for k, line in enumerate(lines, 1):
        env["RECIPE_%d" % k] = line
    server = re.search(r"--server (\S+):(\d+)", lines[2])
    requests = re.search(r"--requests (\d+)", lines[2])
    if not server or not requests:
        print("the replay line names no --server HOST:PORT or --requests N: %r" % lines[2])
        return 1
    env["SERVER_HOST"], env["SERVER_PORT"] = server.group(1), server.group(2)
    requests = int(requests.group(1))
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.join(os.path.abspath(SRC), "tests"), os.path.join(tmp, "tests"))
        # Its own session, so a timeout ends the server and the replay with the shell.
        proc = subprocess.Popen(["unshare", "-rn", "bash", "-c", WRAPPER], cwd=tmp, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=200)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            out += "\n(timed out after 200 s)"
        wrote = os.path.getsize(os.path.join(tmp, "policy.json")) > 0 \
            if os.path.exists(os.path.join(tmp, "policy.json")) else False
    problems = []
    if "=== topology exit 0" not in out or not wrote:
        problems.append("the topology line did not exit 0 with policy.json written")
    if "=== replay exit 0" not in out:
        problems.append("the replay did not exit 0")
    if "=== server stopped 0" not in out:
        problems.append("the server did not stop with exit code 0 on SIGTERM")
    printed = out.split("\n")
    for policy in POLICIES:
        if not any(re.match(r"%s\s+[0-9]" % re.escape(policy), line) for line in printed):
            problems.append("no table row for %s" % policy)
    for row in rows:
        if row not in printed:
            problems.append("row not printed as shown: %r" % row)
    problems += answered_problems(printed, requests)
    for p in problems:
        print(p)
    if problems:
        print("output:\n" + out)
        return 1
    print("ok: the recipe ran as written; %d rows as shown" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

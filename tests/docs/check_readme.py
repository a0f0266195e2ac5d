#!/usr/bin/env python3
"""The README's server, "Try it" and replay recipes run as written.

Usage: check_readme.py SOURCE_ROOT BUILD_ROOT

Taken verbatim from README.md:
- "Quick start": the first command, `tools/install-deps.sh && meson setup build && ninja -C build
  TARGET... && build/src/inferencecache-server ...`. Its set-up steps are checked as text (the
  package installer CI runs on a clean clone; `meson setup` of a directory named `build`, which
  this build tree stands in for); its ninja command runs as written against this build tree; its
  targets must be exactly the binaries the Quick start runs (the server and the CLI of "Try it":
  nothing else is built just to start the server); then the server starts as written;
- "Try it from another shell": every line (the CLI's health, report and lookup, the /metrics and
  /snapshot curls);
- "Real traffic: the Mooncake conversation trace": the block as written, its own ninja line (which
  must build the replay binary it runs) and the replay command.
These run in bash, one after another, in a temporary directory whose `build` is this build tree and
whose `tests` is the source tree's (the paths the README names), inside a private
network namespace (`unshare -rn`, loopback only), so the default ports (9090, 8080, 8081) collide
with nothing on this machine. Asserted: health says SERVING; the lookup answers PREFIX_MATCH on r1;
the metric line counts that one lookup; /snapshot is JSON that holds team-a's entries; the replay
prints its table with a row for each of the four policies and writes its SVG; the server exits 0
on SIGTERM. The replay's figures themselves are not asserted (they depend on the machine's load:
tools/replay/results/ holds measured runs). Also, first: README.md's "Flags" table names every flag
of the server's --help (`--config` and `--version` are in its prose; a row may name a group,
`--gateway-*`); and every target of an inline `ninja -C build TARGET...` in its prose is one of
this build tree's. Skips (77) where user namespaces are refused.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC, BUILD = sys.argv[1], sys.argv[2]
SERVER_PREFIX = "build/src/inferencecache-server"
POLICIES = ("round-robin", "least-work", "full-knowledge", "inferencecache")

# Sourced by bash inside the namespace. Each recipe's output is framed by marker lines so the
# checks below read them apart; the server runs in the background as the README's first shell.
WRAPPER = r"""
set -u
ip link set lo up
bash -c "exec $(cat server.sh)" >server.log 2>&1 &
server=$!
for _ in $(seq 1 100); do
  build/tools/cli/inferencecache-cli health >/dev/null 2>&1 && break
  sleep 0.2
done
n=0
while IFS= read -r line; do
  n=$((n + 1))
  echo "=== try $n"
  bash -c "$line" 2>&1
  echo "=== exit $?"
done <try.sh
echo "=== replay"
bash replay.sh 2>&1
echo "=== exit $?"
kill -TERM "$server"
wait "$server"
echo "=== server exit $?"
"""


def blocks(text, heading):
    """The indented code blocks of the section under `heading`, each as its lines."""
    if heading not in text:
        sys.exit("README.md has no %r section" % heading)
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return [[l[4:] for l in m.group(1).strip("\n").splitlines()]
            for m in re.finditer(r"((?:\n {4}.*\S.*)+)", section)]


def binaries(lines):
    """The build-tree programs `lines` run: {'src/inferencecache-server', ...}."""
    return {m.group(1) for line in lines for m in re.finditer(r"(?:^|\s)build/(\S+)", line)}


def ninja_targets(command):
    """TARGET... of `ninja -C build TARGET...`; exits when the command names none."""
    m = re.fullmatch(r"ninja -C build((?: [\w./-]+)+)", command)
    if not m:
        sys.exit("%r is not `ninja -C build TARGET...`: a bare `ninja -C build` builds the whole "
                 "tree (tests, benchmarks, fuzz targets)" % command)
    return set(m.group(1).split())


def recipes():
    with open(os.path.join(SRC, "README.md"), encoding="utf-8") as f:
        text = f.read()
    quick = blocks(text, "## Quick start (fresh Debian 12)")
    steps = quick[0][0].split(" && ")
    if len(steps) < 4 or steps[:2] != ["tools/install-deps.sh", "meson setup build"]:
        sys.exit("the Quick start's first command no longer begins `tools/install-deps.sh && "
                 "meson setup build && ninja -C build TARGET... && `: %r" % quick[0][0])
    build = steps[2]
    server = " && ".join(steps[3:])
    if not server.startswith(SERVER_PREFIX):
        sys.exit("the Quick start's first command no longer starts %s" % SERVER_PREFIX)
    tried = next((b for b in quick if b[0].startswith("build/tools/cli/inferencecache-cli health")), None)
    if tried is None:
        sys.exit("no \"Try it\" block starting with the CLI's health call under Quick start")
    used = binaries([server] + tried)
    if ninja_targets(build) != used:
        sys.exit("the Quick start's %r builds %s; its commands run %s" % (
            build, sorted(ninja_targets(build)), sorted(used)))
    replay = blocks(text, "## Real traffic: the Mooncake conversation trace")[0]
    replay_built = set()
    for line in replay:
        if line.startswith("ninja "):
            replay_built |= ninja_targets(line)
    if not binaries(replay) <= replay_built | used:
        sys.exit("the replay block runs %s but builds %s" % (sorted(binaries(replay)), sorted(replay_built)))
    return build, server, tried, "\n".join(replay) + "\n"


def missing_flags(text):
    """The server's --help flags that README.md's "## Flags" table leaves out (a row may cover a
    group: `--gateway-*`)."""
    table = text.split("\n## Flags\n", 1)[1].split("\n## ", 1)[0]
    rows = [l for l in table.splitlines() if l.startswith("| `--")]
    named = set(re.findall(r"`(--[a-z0-9-]+)`", "\n".join(rows)))
    groups = re.findall(r"`(--[a-z0-9-]+-)\*`", "\n".join(rows))
    help_text = subprocess.run([os.path.join(BUILD, SERVER_PREFIX[len("build/"):]), "--help"],
                               capture_output=True, text=True, timeout=30, check=False).stdout
    flags = set(re.findall(r"^  (--[a-z0-9-]+)", help_text, re.M)) - {"--version", "--config"}
    return sorted(f for f in flags if f not in named and not any(f.startswith(g) for g in groups))


def unknown_targets(text):
    """Targets of the README's inline `ninja -C build TARGET...` commands that this build tree
    does not have (an optional part this tree leaves out, perf/ or tools/kvevents/, is skipped)."""
    out = subprocess.run(["ninja", "-C", BUILD, "-t", "targets", "all"], capture_output=True,
                         text=True, timeout=60, check=False).stdout
    known = {line.split(":", 1)[0] for line in out.splitlines()}
    unknown = []
    for command in re.findall(r"`(ninja -C build [^`]+)`", text):
        for target in ninja_targets(command):
            part = target.split("/")[0] + "/" if target.startswith("perf/") else target.rsplit("/", 1)[0] + "/"
            if target in known:
                continue
            if not any(k.startswith(part) for k in known):
                print("skip %s: this build tree leaves %s out" % (target, part))
                continue
            unknown.append(target)
    return unknown


def sections(out):
    """{'try 1': (output, exit), ..., 'replay': (output, exit), 'server': exit}."""
    found, name, lines = {}, None, []
    for line in out.splitlines():
        m = re.match(r"=== (try \d+|replay)$", line)
        e = re.match(r"=== exit (\d+)$", line)
        s = re.match(r"=== server exit (\d+)$", line)
        if m:
            name, lines = m.group(1), []
        elif e and name:
            found[name] = ("\n".join(lines), int(e.group(1)))
            name = None
        elif s:
            found["server"] = int(s.group(1))
        elif name:
            lines.append(line)
    return found


def check(found, tried, tmp):
    problems = []
    want = {
        1: lambda o: "SERVING" in o,
        2: lambda o: True,
        3: lambda o: "PREFIX_MATCH" in o and "r1" in o,
        4: lambda o: re.search(r"^inferencecache_lookup_route_calls_total\S* 1$", o, re.M),
        5: lambda o: "team-a" in json.dumps(json.loads(o)),
    }
    if len(tried) != len(want):
        problems.append("the Try it block has %d lines; this check knows %d" % (len(tried), len(want)))
    for i, line in enumerate(tried, 1):
        out, status = found.get("try %d" % i, ("(not run)", -1))
        ok = False
        try:
            ok = status == 0 and bool(want[i](out)) if i in want else False
        except ValueError:
            ok = False
        if not ok:
            problems.append("`%s` exited %d with:\n%s" % (line, status, out[-2000:]))
    out, status = found.get("replay", ("(not run)", -1))
    rows = [p for p in POLICIES if re.search(r"^%s\s+\d" % re.escape(p), out, re.M)]
    if status != 0 or "mean TTFT" not in out or len(rows) != len(POLICIES):
        problems.append("the replay exited %d, rows %s of %s:\n%s" % (status, rows, POLICIES, out[-3000:]))
    svg = os.path.join(tmp, "replay.svg")
    if not os.path.exists(svg) or not open(svg, encoding="utf-8").read(200).lstrip().startswith("<"):
        problems.append("the replay wrote no replay.svg")
    if found.get("server") != 0:
        problems.append("the server exited %s on SIGTERM" % found.get("server"))
    return problems


def main():
    if not shutil.which("ip"):
        print("SKIP: no ip(8) (iproute2) to bring up the namespace's loopback")
        return 77
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-rn", "true"], capture_output=True, check=False).returncode != 0:
        print("SKIP: no private network namespace (unshare -rn) here")
        return 77
    with open(os.path.join(SRC, "README.md"), encoding="utf-8") as f:
        unlisted = missing_flags(f.read())
    if unlisted:
        print("FAIL: README.md's Flags table leaves out %s (the server's --help has them)" % unlisted)
        return 1
    with open(os.path.join(SRC, "README.md"), encoding="utf-8") as f:
        unknown = unknown_targets(f.read())
    if unknown:
        print("FAIL: README.md names ninja targets this build tree does not have: %s" % unknown)
        return 1
    build, server, tried, replay = recipes()
    print("build: " + build + "\nserver: " + server + "\ntry it:\n" + "\n".join(tried) +
          "\nreplay:\n" + replay)
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.abspath(BUILD), os.path.join(tmp, "build"))
        # meson test built these already: as written, it finds them up to date.
        r = subprocess.run(["bash", "-c", build], cwd=tmp, capture_output=True, text=True,
                           timeout=600, check=False)
        if r.returncode != 0:
            print("FAIL: `%s` exited %d:\n%s" % (build, r.returncode, (r.stdout + r.stderr)[-3000:]))
            return 1
        for name in ("tests",):
            os.symlink(os.path.join(os.path.abspath(SRC), name), os.path.join(tmp, name))
        for name, body in (("server.sh", server + "\n"), ("try.sh", "\n".join(tried) + "\n"),
                           ("replay.sh", replay)):
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(body)
        r = subprocess.run(["unshare", "-rn", "bash", "-c", WRAPPER], cwd=tmp, capture_output=True,
                           text=True, timeout=600, check=False)
        print(r.stdout[-6000:])
        problems = check(sections(r.stdout), tried, tmp)
        if problems:
            with open(os.path.join(tmp, "server.log"), encoding="utf-8", errors="replace") as f:
                print("server log (tail):\n" + f.read()[-3000:])
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


sys.exit(main())

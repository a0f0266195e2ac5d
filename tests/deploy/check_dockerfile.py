#!/usr/bin/env python3
"""Offline checks of deploy/Dockerfile (no image can be pulled or built here).

Usage: check_dockerfile.py SOURCE_ROOT BUILD_ROOT

- two stages on Debian 12, the last one the runtime; it runs as a fixed non-root uid that
  matches deploy/kubernetes/base/deployment.yaml's runAsUser;
- the build stage installs every build package of tools/install-deps.sh (the part before its
  "test clients" comment), so the image builds what CI builds;
- the runtime stage installs, directly or through their Debian dependencies, the package of every
  shared library the installed binaries of this build load (ldd + dpkg), so nothing is missing at
  run time;
- ENTRYPOINT and HEALTHCHECK name binaries the build installs, and the server's CMD flags exist.
"""
import json
import os
import re
import shlex
import subprocess
import sys

from deploy_common import (installed_executables, flags_of, flag_names, load_yaml_docs, require,
                           run_checks)

SRC, BUILD = sys.argv[1], sys.argv[2]
DOCKERFILE = os.path.join(SRC, "deploy", "Dockerfile")
# Packages every debian:12-slim image has (apt itself depends on them).
SLIM_BASE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
# Libraries a sanitizer build adds; the image is a release build.
SANITIZER_LIBS = ("libasan", "libubsan", "liblsan", "libtsan")


def instructions():
    """[(stage index, INSTRUCTION, argument text)] with continuation lines joined."""
    out, stage, buf = [], -1, ""
    with open(DOCKERFILE, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not buf and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                buf += line[:-1] + " "
                continue
            buf += line
            word, _, rest = buf.strip().partition(" ")
            if word.upper() == "FROM":
                stage += 1
            out.append((stage, word.upper(), rest.strip()))
            buf = ""
    return out


INSTR = instructions()
ARGS = {rest.split("=", 1)[0]: rest.split("=", 1)[1] for _, w, rest in INSTR
        if w == "ARG" and "=" in rest}


def stage_lines(stage, word):
    return [rest for s, w, rest in INSTR if s == stage and w == word]


def apt_packages(stage):
    pkgs = set()
    for run in stage_lines(stage, "RUN"):
        for part in run.split("&&"):
            tokens = shlex.split(part)
            if "apt-get" in " ".join(tokens) and "install" in tokens:
                pkgs |= {t for t in tokens[tokens.index("install") + 1:] if not t.startswith("-")}
    return pkgs


def last_stage():
    return max(s for s, _, _ in INSTR)


def check_stages_on_debian_12():
    froms = [rest for _, w, rest in INSTR if w == "FROM"]
    require(len(froms) >= 2, "expected a multi-stage build, got %d FROM" % len(froms))
    for f in froms:
        image = f.split()[0]
        image = re.sub(r"\$\{(\w+)\}", lambda m: ARGS.get(m.group(1), m.group(0)), image)
        require(re.fullmatch(r"debian:(12|bookworm)(-slim)?(@sha256:[0-9a-f]{64})?", image),
                "stage base %r is not Debian 12" % image)
    require(froms[0].split()[-1] == "build" and froms[-1].split()[-1] == "runtime",
            "stages should be named build ... runtime: %r" % froms)


def check_runs_as_non_root():
    users = stage_lines(last_stage(), "USER")
    require(users, "the runtime stage sets no USER")
    uid, _, gid = users[-1].partition(":")
    require(uid.isdigit() and int(uid) > 0, "USER %r must be a numeric non-root uid" % users[-1])
    require(not gid or (gid.isdigit() and int(gid) > 0), "group of USER %r is root" % users[-1])
    deployment = load_yaml_docs(os.path.join(SRC, "deploy", "kubernetes", "base", "deployment.yaml"))[0]
    run_as = deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    require(run_as == int(uid), "deployment runAsUser %s != Dockerfile USER %s" % (run_as, uid))


def check_build_stage_has_the_build_packages():
    with open(os.path.join(SRC, "tools", "install-deps.sh"), encoding="utf-8") as f:
        script = f.read()
    wanted = set()
    for line in script.split("packages=(", 1)[1].splitlines():
        if line.strip() == ")" or "test clients" in line:
            break
        wanted |= set(line.split("#")[0].split())
    require(wanted, "no build packages found in tools/install-deps.sh")
    missing = sorted(wanted - apt_packages(0))
    require(not missing, "the build stage does not install %s (tools/install-deps.sh)" % missing)


def owning_packages(libs):
    """{library path: Debian package} for the libraries dpkg knows, in one dpkg -S call (the
    database spells a path with or without the merged /usr prefix)."""
    variants = {}
    for lib in libs:
        for path in (lib, "/usr" + lib, os.path.realpath(lib)):
            variants.setdefault(path, lib)
    r = subprocess.run(["dpkg", "-S"] + sorted(variants), capture_output=True, text=True,
                       check=False)
    owners = {}
    for line in r.stdout.splitlines():
        pkgs, _, path = line.partition(": ")
        if path in variants:
            owners[variants[path]] = pkgs.split(",")[0].split(":")[0].strip()
    return owners


def installed_dependency_closure(roots):
    """Every installed package reachable from roots through Depends/Pre-Depends."""
    fmt = "${Package}\t${Depends}, ${Pre-Depends}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f=" + fmt], capture_output=True, text=True,
                         check=True).stdout
    deps = {}
    for line in out.splitlines():
        name, _, rest = line.partition("\t")
        deps[name] = {re.split(r"[\s(:]", alt.strip())[0] for d in rest.split(",")
                      for alt in d.split("|") if alt.strip()}
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(deps.get(p, ()))
    return seen


def check_runtime_stage_has_every_library():
    binaries = installed_executables(BUILD)
    require(binaries, "the build installs no executable")
    libs = set()
    for built in binaries.values():
        out = subprocess.run(["ldd", built], capture_output=True, text=True, check=True).stdout
        libs |= {m.group(1) for m in re.finditer(r"=>\s+(/\S+)", out)}
    libs = {lib for lib in libs if not os.path.basename(lib).startswith(SANITIZER_LIBS)}
    available = installed_dependency_closure(apt_packages(last_stage()) | SLIM_BASE)
    problems = []
    owners = owning_packages(libs)
    for lib in sorted(libs):
        pkg = owners.get(lib)
        if pkg is None:
            problems.append("%s belongs to no Debian package" % lib)
        elif pkg not in available:
            problems.append("%s (%s) is not installed by the runtime stage" % (lib, pkg))
    require(not problems, "; ".join(problems))


def exec_form(text):
    """The argv of an exec-form (JSON array) or shell-form instruction argument."""
    text = text.strip()
    return json.loads(text) if text.startswith("[") else shlex.split(text)


def check_entrypoint_and_healthcheck():
    installed = installed_executables(BUILD)

    def installed_binary(path):
        # The build stage installs with --prefix=/usr/local.
        return path.startswith("/usr/local/bin/") and os.path.basename(path) in installed

    entry = exec_form(stage_lines(last_stage(), "ENTRYPOINT")[-1])
    require(installed_binary(entry[0]), "ENTRYPOINT %s is not installed by the build" % entry[0])
    cmd = exec_form(stage_lines(last_stage(), "CMD")[-1])
    unknown = sorted(set(flag_names(cmd)) - flags_of(installed[os.path.basename(entry[0])]))
    require(not unknown, "CMD passes flags the server does not have: %s" % unknown)
    health = stage_lines(last_stage(), "HEALTHCHECK")
    require(health, "no HEALTHCHECK")
    probe = exec_form(health[-1].split("CMD", 1)[1].strip())
    require(installed_binary(probe[0]), "HEALTHCHECK runs %s, not installed by the build" % probe[0])
    require("health" in probe, "HEALTHCHECK should run the grpc.health.v1 check: %r" % probe)


def check_image_holds_the_adapter():
    """The sidecar example runs the adapter from this image: the build must enable it (a
    disabled-when-missing build would ship an image without it) and the manifests must name the
    path it is installed at."""
    setup = " ".join(r for r in stage_lines(0, "RUN") if "meson setup" in r)
    require("-Dkvevents=enabled" in setup, "the build stage must configure -Dkvevents=enabled")
    installed = " ".join(stage_lines(0, "RUN"))
    require("/staging/usr/local/bin/inferencecache-kvevents --version" in installed,
            "the build stage should run the installed adapter once")
    example = load_yaml_docs(os.path.join(SRC, "deploy", "kubernetes", "examples", "vllm-kvevents",
                                          "deployment.yaml"))[0]
    side = next(c for c in example["spec"]["template"]["spec"]["containers"]
                if c["name"] == "kvevents")
    require(side["command"] == ["/usr/local/bin/inferencecache-kvevents"],
            "the sidecar runs %s" % side["command"])


def check_exposes_the_default_ports():
    exposed = {p for line in stage_lines(last_stage(), "EXPOSE") for p in line.split()}
    require(exposed == {"9090", "8080", "8081"}, "EXPOSE %s" % sorted(exposed))


run_checks([check_stages_on_debian_12, check_runs_as_non_root,
            check_build_stage_has_the_build_packages, check_runtime_stage_has_every_library,
            check_entrypoint_and_healthcheck, check_image_holds_the_adapter,
            check_exposes_the_default_ports])

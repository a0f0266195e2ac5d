#!/usr/bin/env python3
"""The deploy recipes of README.md, docs/ and deploy/ name files that exist and run as written.

Usage: check_recipes.py SOURCE_ROOT [KVEVENTS_BINARY]

- every `kubectl apply -k DIR` / `kubectl kustomize DIR` names a folder with a kustomization that
  is not a Component (so tests/deploy/check_kustomize.py builds exactly what the text applies);
- every `deploy/...` path the text names exists;
- the adapter container shown in docs/kvevents.md "As a Kubernetes sidecar" is, line for line, a
  piece of deploy/kubernetes/examples/vllm-kvevents/deployment.yaml;
- the `inferencecache-kvevents ...` command lines of docs/kvevents.md run as written (bash, with
  POD_NAME and POD_NAMESPACE set as a pod would have them, in a private network namespace): each
  must still run after 1.5 s (a bad flag exits 2 at once) and exit 0 on SIGTERM;
- the seccomp profile's install line of deploy/README.md "io_uring and seccomp" runs as written,
  from the repository root, in a private mount namespace whose /var/lib is an empty tmpfs, and
  leaves a byte-identical copy of the profile where the kubelet looks for it.
- every `kubectl ... create secret` line (deploy/README.md, the base kustomization's comment)
  runs as written plus `--dry-run=client -o yaml` (offline: no cluster is reached) and builds the
  Secret the base Deployment mounts, in the base's namespace, with a 32-byte random token;
- every `docker run` line of deploy/README.md (docker is not installed here) passes only flags
  this check knows, publishes ports the Dockerfile EXPOSEs, names the image `docker build -t`
  tags, and its `--security-opt seccomp=` path, taken from the repository root, is the shipped
  profile (tests/deploy/check_seccomp.py runs the server under it).
Parts that need a private namespace or kubectl skip (with a line saying so) where `unshare -r` is
refused or kubectl is missing.
"""
import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

SRC = sys.argv[1]
KVEVENTS = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
EXAMPLE = os.path.join(SRC, "deploy", "kubernetes", "examples", "vllm-kvevents", "deployment.yaml")
PROFILE = os.path.join(SRC, "deploy", "seccomp", "inferencecache-io-uring.json")
KUBELET_PROFILE = "/var/lib/kubelet/seccomp/profiles/inferencecache-io-uring.json"
KVEVENTS_DOC = "docs/kvevents.md"
PROBLEMS = []


def texts():
    """{relative path: text} of README.md, docs/*.md and every text file under deploy/."""
    out = {}
    paths = ["README.md"] + [os.path.join("docs", n) for n in sorted(os.listdir(os.path.join(SRC, "docs")))
                             if n.endswith(".md")]
    for dirpath, _, files in os.walk(os.path.join(SRC, "deploy")):
        for n in sorted(files):
            if n.endswith((".md", ".yaml", ".service")) or n == "Dockerfile":
                paths.append(os.path.relpath(os.path.join(dirpath, n), SRC))
    for rel in paths:
        with open(os.path.join(SRC, rel), encoding="utf-8") as f:
            out[rel] = f.read()
    return out


TEXTS = texts()


def code_blocks(text, heading):
    """The indented (4 spaces) code blocks of the section under `heading`, dedented."""
    section = text.split(heading, 1)[1]
    level = heading.split(" ", 1)[0]
    section = re.split(r"\n#{1,%d} " % len(level), section, maxsplit=1)[0]
    paragraphs = [p.strip("\n") for p in re.split(r"\n\s*\n", section)]
    return ["\n".join(l[4:] for l in p.split("\n")) for p in paragraphs
            if p and all(l.startswith("    ") for l in p.split("\n"))]


def is_kustomization(rel):
    path = os.path.join(SRC, rel.rstrip("/"), "kustomization.yaml")
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        return "kind: Component" not in f.read()


def check_kustomize_targets():
    seen = 0
    for rel, text in TEXTS.items():
        for m in re.finditer(r"kubectl (?:apply -k|kustomize) (\S+?)[`)\s]", text + "\n"):
            seen += 1
            if not is_kustomization(m.group(1)):
                PROBLEMS.append("%s: `%s` names no kustomization folder" % (rel, m.group(0).strip()))
    if seen < 8:
        PROBLEMS.append("only %d kubectl -k commands found" % seen)
    print("ok   %d kubectl -k / kustomize commands name kustomizations" % seen)


def check_deploy_paths_exist():
    seen = set()
    for rel, text in TEXTS.items():
        for m in re.finditer(r"(?<![\w/.-])deploy/[A-Za-z0-9_./-]*[A-Za-z0-9_/]", text):
            path = m.group(0)
            seen.add(path)
            if not os.path.exists(os.path.join(SRC, path)):
                PROBLEMS.append("%s names %s, which does not exist" % (rel, path))
    print("ok   %d deploy/ paths named, checked" % len(seen))


def check_sidecar_excerpt():
    doc = TEXTS[KVEVENTS_DOC]
    blocks = code_blocks(doc, "### As a Kubernetes sidecar")
    if not blocks:
        PROBLEMS.append("docs/kvevents.md \"As a Kubernetes sidecar\" shows no container")
        return
    with open(EXAMPLE, encoding="utf-8") as f:
        file_lines = f.read().split("\n")
    shown = blocks[0].split("\n")
    indent = next(len(l) - len(l.lstrip()) for l in file_lines if l.strip() == shown[0].strip())
    for start in range(len(file_lines)):
        if [l[indent:] for l in file_lines[start:start + len(shown)]] == shown:
            print("ok   the sidecar excerpt is lines %d-%d of the example"
                  % (start + 1, start + len(shown)))
            return
    PROBLEMS.append("the container in docs/kvevents.md is not the text of %s"
                    % os.path.relpath(EXAMPLE, SRC))


def namespaces_available(flags):
    return subprocess.run(["unshare", flags, "true"], capture_output=True,
                          check=False).returncode == 0


def check_kvevents_command_lines():
    if not KVEVENTS:
        print("skip the adapter's command lines: built without inferencecache-kvevents")
        return
    if not namespaces_available("-rn") or not shutil.which("ip"):
        print("skip the adapter's command lines: no private network namespace (unshare -rn, ip)")
        return
    doc = TEXTS[KVEVENTS_DOC]
    commands = [b for heading in ("### Next to vLLM", "### Next to SGLang")
                for b in code_blocks(doc, heading) if b.startswith("inferencecache-kvevents ")]
    if len(commands) != 2:
        PROBLEMS.append("expected the vLLM and SGLang adapter command lines, found %d" % len(commands))
    env = dict(os.environ, POD_NAME="llama-8b-7d9f-x2x4q", POD_NAMESPACE="team-a",
               POD_IP="10.0.0.7")
    env["PATH"] = os.path.dirname(os.path.abspath(KVEVENTS)) + os.pathsep + env.get("PATH", "")
    for command in commands:
        proc = subprocess.Popen(["unshare", "-rn", "bash", "-c",
                                 "ip link set lo up && exec " + command],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(1.5)
        if proc.poll() is not None:
            PROBLEMS.append("exited %d at once:\n%s\n%s" % (proc.returncode, command, proc.stderr.read()))
            continue
        proc.terminate()
        _, err = proc.communicate(timeout=15)
        if proc.returncode != 0:
            PROBLEMS.append("exit %d after SIGTERM:\n%s\n%s" % (proc.returncode, command, err))
        else:
            print("ok   ran: %s" % command.split("\n")[0])


def check_seccomp_install_line():
    if not namespaces_available("-rm"):
        print("skip the profile's install line: no private mount namespace (unshare -rm)")
        return
    blocks = [b for b in code_blocks(TEXTS[os.path.join("deploy", "README.md")],
                                     "### io_uring and seccomp") if b.startswith("install ")]
    if len(blocks) != 1:
        PROBLEMS.append("deploy/README.md \"io_uring and seccomp\": no install line")
        return
    script = ("mount -t tmpfs tmpfs /var/lib && %s && cmp %s %s && stat -c %%a %s"
              % (blocks[0], PROFILE, KUBELET_PROFILE, KUBELET_PROFILE))
    r = subprocess.run(["unshare", "-rm", "bash", "-c", script], cwd=SRC, capture_output=True,
                       text=True, check=False, timeout=30)
    if r.returncode != 0 or r.stdout.strip() != "644":
        PROBLEMS.append("the install line failed (%d): %s%s" % (r.returncode, r.stdout, r.stderr))
    else:
        print("ok   ran: %s" % blocks[0])


def command_lines(text, program):
    """Commands starting with `program` in `text` (YAML comments' "#" prefix removed), with their
    backslash-continued lines joined as bash would run them."""
    lines = [re.sub(r"^\s*#?\s*", "", l) for l in text.split("\n")]
    out = []
    i = 0
    while i < len(lines):
        if lines[i].startswith(program + " "):
            command = lines[i]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i]
            out.append(command)
        i += 1
    return out


def yaml_value(text, key):
    m = re.search(r"^\s*%s:\s*(\S+)\s*$" % re.escape(key), text, re.M)
    return m.group(1) if m else None


def check_secret_lines():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("skip the create secret lines: no kubectl (it comes with the machine image)")
        return
    base = os.path.join("deploy", "kubernetes", "base")
    secret_name = yaml_value(TEXTS[os.path.join(base, "deployment.yaml")], "secretName")
    namespace = yaml_value(TEXTS[os.path.join(base, "kustomization.yaml")], "namespace")
    found = 0
    for rel in (os.path.join("deploy", "README.md"), os.path.join(base, "kustomization.yaml")):
        for command in command_lines(TEXTS[rel], "kubectl"):
            if " create secret " not in command:
                continue
            found += 1
            r = subprocess.run(["bash", "-c", command + " --dry-run=client -o yaml"], cwd=SRC,
                               capture_output=True, text=True, check=False, timeout=60,
                               env=dict(os.environ, KUBECONFIG=os.devnull))
            out = r.stdout
            token = yaml_value(out, "token")
            problems = []
            if r.returncode != 0:
                problems.append("exit %d: %s" % (r.returncode, r.stderr))
            if yaml_value(out, "kind") != "Secret":
                problems.append("no Secret")
            if yaml_value(out, "name") != secret_name:
                problems.append("not the Secret the Deployment mounts (%s)" % secret_name)
            if yaml_value(out, "namespace") != namespace:
                problems.append("not in the base's namespace (%s)" % namespace)
            if token is None or len(base64.b64decode(base64.b64decode(token))) != 32:
                problems.append("the token is not 32 random bytes, base64")
            if problems:
                PROBLEMS.append("%s: %s: %s" % (rel, command, "; ".join(problems)))
            else:
                print("ok   ran (--dry-run=client): %s" % command)
    if found != 2:
        PROBLEMS.append("expected the create secret line in deploy/README.md and the base "
                        "kustomization, found %d" % found)


def check_docker_run_lines():
    readme = TEXTS[os.path.join("deploy", "README.md")]
    exposed = set(re.search(r"^EXPOSE (.*)$", TEXTS[os.path.join("deploy", "Dockerfile")],
                            re.M).group(1).split())
    builds = command_lines(readme, "docker build")
    tags = {shlex.split(b)[shlex.split(b).index("-t") + 1] for b in builds}
    runs = command_lines(readme, "docker run")
    if not runs or len(tags) != 1:
        PROBLEMS.append("deploy/README.md: expected docker run lines and one docker build -t tag")
        return
    for command in runs:
        words = shlex.split(command)[2:]
        problems = []
        i = 0
        while i < len(words) and words[i].startswith("-"):
            flag = words[i]
            if flag == "--rm":
                i += 1
                continue
            if flag not in ("-p", "--security-opt") or i + 1 >= len(words):
                problems.append("unknown flag %s" % flag)
                break
            value = words[i + 1]
            if flag == "-p" and value.split(":")[-1] not in exposed:
                problems.append("-p %s: the image EXPOSEs %s" % (value, sorted(exposed)))
            if flag == "--security-opt":
                path = value.split("=", 1)[1] if value.startswith("seccomp=") else None
                if path is None or os.path.realpath(os.path.join(SRC, path)) != os.path.realpath(PROFILE):
                    problems.append("--security-opt %s: not seccomp=<the shipped profile>" % value)
                else:
                    with open(PROFILE, encoding="utf-8") as f:
                        if "defaultAction" not in json.load(f):
                            problems.append("the profile has no defaultAction")
            i += 2
        if words[i:] != sorted(tags):
            problems.append("image %s, but docker build tags %s" % (words[i:], sorted(tags)))
        if problems:
            PROBLEMS.append("deploy/README.md: %s: %s" % (command, "; ".join(problems)))
        else:
            print("ok   checked (no docker here): %s" % command)


check_kustomize_targets()
check_deploy_paths_exist()
check_sidecar_excerpt()
check_kvevents_command_lines()
check_seccomp_install_line()
check_secret_lines()
check_docker_run_lines()
for p in PROBLEMS:
    print("FAIL " + p)
sys.exit(1 if PROBLEMS else 0)

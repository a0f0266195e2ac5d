"""Helpers shared by the offline checks of deploy/ (tests/deploy/meson.build)."""
import json
import os
import re
import subprocess
import sys

import yaml


class CheckFailed(Exception):
    """One violated expectation; main() prints it and exits 1."""


def require(condition, message):
    if not condition:
        raise CheckFailed(message)


def run_checks(checks):
    """Runs every check, prints each failure, exits 1 if any failed (0 otherwise)."""
    failures = 0
    for check in checks:
        try:
            check()
            print("ok   " + check.__name__)
        except CheckFailed as e:
            failures += 1
            print("FAIL " + check.__name__ + ": " + str(e))
    sys.exit(1 if failures else 0)


def load_yaml_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def installed_executables(build_root):
    """{file name: built path} of the executables the build installs (meson introspection), e.g.
    {'inferencecache-server': '<build>/src/inferencecache-server'}."""
    with open(os.path.join(build_root, "meson-info", "intro-targets.json"), encoding="utf-8") as f:
        targets = json.load(f)
    out = {}
    for t in targets:
        if t["type"] == "executable" and t.get("installed"):
            for built in t["filename"]:
                out[os.path.basename(built)] = built
    return out


def flags_of(binary):
    """The long options a CLI11 binary's --help lists, e.g. {'--threads', '--help'}."""
    text = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30,
                          check=False).stdout
    return set(re.findall(r"(?:^|[\s,])(--[a-z][a-z0-9-]*)", text))


def flag_names(args):
    """'--name' of every '--name=value' / '--name' argument (values passed separately skipped)."""
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]

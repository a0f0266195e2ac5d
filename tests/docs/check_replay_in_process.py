#!/usr/bin/env python3
"""tools/README.md "In-process index": its command runs as written and prints the rows shown.

Usage: check_replay_in_process.py SOURCE_ROOT BUILD_ROOT

The section's first indented block is the command (backslash-continued lines), its second the
table rows the text says it prints. The command runs in bash, twice, in a temporary directory
whose `build` is this build tree and whose `tools` and `tests` are the source tree's (the paths
it names). Asserted: exit 0 both times; the same output both times but for the header's wall
time; every row of the second block is a line of that output, character for character (the
in-process index keeps trace time, so its figures do not depend on the machine).
"""
import os
import re
import subprocess
import sys
import tempfile

from section_blocks import section_blocks

SRC, BUILD = sys.argv[1], sys.argv[2]
SECTION = "### In-process index"


def main():
    with open(os.path.join(SRC, "tools", "README.md"), encoding="utf-8") as f:
        text = f.read()
    found = section_blocks(text, SECTION)
    if found is None:
        print("tools/README.md has no %r section" % SECTION)
        return 1
    if len(found) < 2:
        print("expected the command and its rows in %r, found %d blocks" % (SECTION, len(found)))
        return 1
    command, rows = "\n".join(found[0]), found[1]
    if not command.startswith("build/tools/replay/inferencecache-replay --index in-process"):
        print("the command is not an in-process replay: %r" % command)
        return 1
    outputs = []
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.abspath(BUILD), os.path.join(tmp, "build"))
        for name in ("tools", "tests"):
            os.symlink(os.path.join(os.path.abspath(SRC), name), os.path.join(tmp, name))
        for _ in range(2):
            run = subprocess.run(["bash", "-c", command], cwd=tmp, capture_output=True,
                                 text=True, timeout=120)
            if run.returncode != 0:
                print("exit %d\n%s%s" % (run.returncode, run.stdout, run.stderr))
                return 1
            outputs.append(re.sub(r"virtual time \([0-9.]+ s of wall time\)", "virtual time",
                                  run.stdout))
    problems = []
    if outputs[0] != outputs[1]:
        problems.append("two runs differ:\n%s\n---\n%s" % (outputs[0], outputs[1]))
    lines = outputs[0].split("\n")
    for row in rows:
        if row not in lines:
            problems.append("row not printed as shown: %r" % row)
    for p in problems:
        print(p)
    if problems:
        print("output:\n" + outputs[0])
        return 1
    print("ok: %d rows as shown, two runs identical" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

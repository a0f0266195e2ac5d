#!/usr/bin/env python3
"""Nothing in the repository points outside it, and docs/ citations resolve.

Usage: check_references.py SOURCE_ROOT

Scans the text files of src/, tools/, tests/, perf/, deploy/, docs/, proto/ and the top-level
README.md and meson files (tests/data excepted: upstream copies) for:
- paths outside the repository: `../shared` with its spec, data and seed folders, `/work`, and spec
  names without their docs/ folder (`spec/lookup.md`, `lookup.md`, `ARCHITECTURE.md`);
- `docs/NAME.md` citations: the document exists, or docs/README.md lists it (documents other
  work adds); when it exists, a quoted section right after the citation (`docs/index.md "Global
  cap"`, `docs/index.md "Ingest", "Events"`) is one of its headings (or the start of one), and
  `docs/lookup.md step N` / `docs/architecture.md rule N` name an item of its numbered list.
"""
import os
import re
import sys

SRC = sys.argv[1]
ROOTS = ["src", "tools", "tests", "perf", "deploy", "docs", "proto"]
TOP = ["README.md", "meson.build", "meson_options.txt"]
SKIP_DIRS = {"node_modules", "data", "__pycache__"}
TEXT_EXT = (".cc", ".hh", ".h", ".cpp", ".md", ".build", ".py", ".sh", ".mjs", ".js", ".json",
            ".yaml", ".yml", ".proto", ".txt", ".service", "Dockerfile", ".yamllint")
OUTSIDE = re.compile(r"\.\./shared\b|(?<![\w.-])shared[/](spec|data|seed)[/]|/work[/][\w.-]+")
# A spec's bare name (`lookup.md`, `spec/lookup.md`, `ARCHITECTURE.md`) outside docs/ means a file
# the repository does not have; the repository's copy is docs/NAME.md.
BARE = re.compile(r"(?<![\w/.-])(?:spec/)?(admin|contract|index|lookup|fingerprint|policy|kvevents|"
                  r"architecture|ARCHITECTURE|grpc-contract)\.md")
CITATION = re.compile(r"docs/([a-z][a-z0-9-]*)\.md((?:[ ,]+\"[^\"]+\")*)(?:\s+(step|rule)s?\s+(\d+))?")
SELF = os.path.join("tests", "docs", "check_references.py")


def files():
    for top in TOP:
        yield top
    for root in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(SRC, root)):
            rel = os.path.relpath(dirpath, SRC)
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS or rel != "tests"]
            dirnames[:] = [d for d in dirnames if d != "node_modules"]
            for name in filenames:
                if name.endswith(TEXT_EXT):
                    yield os.path.join(rel, name)


def headings(doc):
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    heads = [re.sub(r"[`*]", "", h).strip() for h in re.findall(r"^#+\s+(.+)$", text, re.M)]
    items = set(re.findall(r"^\s*(\d+)\.\s", text, re.M))
    return heads, items


def listed_in_index():
    with open(os.path.join(SRC, "docs", "README.md"), encoding="utf-8") as f:
        return set(re.findall(r"\]\(([a-z0-9-]+)\.md\)", f.read()))


def main():
    problems, citations = [], 0
    listed = listed_in_index()
    cache = {}
    for rel in files():
        if rel == SELF:
            continue
        try:
            with open(os.path.join(SRC, rel), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for n, line in enumerate(lines, 1):
            where = "%s:%d" % (rel, n)
            if OUTSIDE.search(line):
                problems.append("%s points outside the repository: %s" % (where, line.strip()))
            if not rel.startswith("docs" + os.sep) and BARE.search(line):
                problems.append("%s names a spec outside docs/: %s" % (where, line.strip()))
            for m in CITATION.finditer(line):
                citations += 1
                name, sections, kind, number = m.group(1), m.group(2), m.group(3), m.group(4)
                doc = os.path.join(SRC, "docs", name + ".md")
                if not os.path.exists(doc):
                    if name not in listed:
                        problems.append("%s cites docs/%s.md, which does not exist" % (where, name))
                    continue
                heads, items = cache.setdefault(doc, headings(doc))
                for section in re.findall(r"\"([^\"]+)\"", sections or ""):
                    if not any(h == section or h.startswith(section) for h in heads):
                        problems.append("%s cites docs/%s.md \"%s\": no such heading"
                                        % (where, name, section))
                if number is not None and number not in items:
                    problems.append("%s cites docs/%s.md %s %s: no such item"
                                    % (where, name, kind, number))
    for p in problems:
        print(p)
    print("%d docs/ citations checked, %d problems" % (citations, len(problems)))
    return 1 if problems else 0


sys.exit(main())

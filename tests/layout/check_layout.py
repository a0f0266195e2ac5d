#!/usr/bin/env python3
"""The rooms of src/ (docs/architecture.md "Rooms"), checked from the code.

Usage: check_layout.py <src dir> <build.ninja>

1. The include graph between folders of src/ has no cycle.
2. Forbidden includes: sharding, persist, placement and replication never include
   service/ (they sit below the gRPC handlers); metrics/ includes nothing from h2,
   service, persist or replication (each registers its own families); net/ and rpc/
   include nothing from config/ (the logger is in base/).
3. The link closure of persist, placement and replication (the probe executables of
   tests/layout/meson.build, each linking only that library's dependency) holds neither
   nghttp2 nor the tokenizer (nor prompt_text, nor PCRE2, which come with it).

Prints every violation and exits 1 if there is any.
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/[^"]+"', re.M)

FORBIDDEN = {
    'sharding': {'service'},
    'persist': {'service'},
    'placement': {'service'},
    'replication': {'service'},
    'metrics': {'h2', 'service', 'persist', 'replication'},
    'net': {'config'},
    'rpc': {'config'},
}

# Probe executable (tests/layout/meson.build) -> what must not be in its link.
PROBES = ['persist', 'placement', 'replication']
NOT_LINKED = {
    'nghttp2': re.compile(r'(^|[\s/])(-lnghttp2|libnghttp2[^\s]*)(\s|$)'),
    'the tokenizer': re.compile(r'libictokenizer\.a'),
    'prompt_text': re.compile(r'libicprompttext\.a'),
    'PCRE2': re.compile(r'(-lpcre2-8|libpcre2-8)'),
}


def folder_edges(src):
    """{(from folder, to folder): [file that includes, ...]} over src/'s folders."""
    folders = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    edges = {}
    for folder in sorted(folders):
        for root, _, files in os.walk(os.path.join(src, folder)):
            for name in sorted(files):
                if not name.endswith(('.hh', '.cc', '.h', '.in')):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding='utf-8') as f:
                    text = f.read()
                for target in INCLUDE.findall(text):
                    if target in folders and target != folder:
                        edges.setdefault((folder, target), []).append(os.path.relpath(path, src))
    return folders, edges


def find_cycles(folders, edges):
    """The strongly connected components of more than one folder (Tarjan)."""
    graph = {f: sorted({b for (a, b) in edges if a == f}) for f in folders}
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in sorted(folders):
        if v not in index:
            visit(v)
    return result


def link_lines(build_ninja):
    """{executable path: its build statement's inputs and LINK_ARGS, one string}."""
    with open(build_ninja, encoding='utf-8') as f:
        lines = f.read().split('\n')
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r'build (\S+): cpp_LINKER (.*)', line)
        if not m:
            continue
        text = m.group(2)
        j = i + 1
        while j < len(lines) and lines[j].startswith(' '):
            if lines[j].strip().startswith('LINK_ARGS'):
                text += ' ' + lines[j]
            j += 1
        out[m.group(1)] = text
    return out


def main():
    src, build_ninja = sys.argv[1], sys.argv[2]
    problems = []
    folders, edges = folder_edges(src)
    for cycle in find_cycles(folders, edges):
        ring = [(a, b) for (a, b) in edges if a in cycle and b in cycle]
        detail = '; '.join(f'{a} -> {b} ({edges[(a, b)][0]})' for a, b in sorted(ring))
        problems.append(f'include cycle between folders {", ".join(cycle)}: {detail}')
    for (a, b), files in sorted(edges.items()):
        if b in FORBIDDEN.get(a, ()):
            problems.append(f'{a}/ includes {b}/: {", ".join(sorted(set(files)))}')
    links = link_lines(build_ninja)
    for probe in PROBES:
        key = f'tests/layout/layout_probe_{probe}'
        if key not in links:
            problems.append(f'{key}: no link statement in {build_ninja}')
            continue
        for what, pattern in NOT_LINKED.items():
            if pattern.search(links[key]):
                problems.append(f'{probe} links {what}')
    for p in problems:
        print(p)
    if not problems:
        print(f'{len(folders)} folders, {len(edges)} folder edges, no cycle, no forbidden '
              f'include; {", ".join(PROBES)} link neither nghttp2 nor the tokenizer')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())

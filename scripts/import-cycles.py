#!/usr/bin/env python3
"""Import circles among a crate's files, from their `use` lines.

A file reaches another when one of its `use` lines names an item of the
other's module (`use crate::a::b::Item`, `use super::x`, `use self::y`, grouped
forms too). A circle is a set of files that reach each other (a strongly
connected component of more than one file). Prints each circle and a total;
exits 1 when there are more than `--max` (default 0).

    scripts/import-cycles.py [--max N] [CRATE_SRC_DIR ...]

Without directories, every `src` folder of the workspace's crates.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modules(src):
    """Module path (tuple) -> file, for every .rs file under src."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)[:-3].split(os.sep)
            if rel[-1] in ("lib", "main", "mod"):
                rel = rel[:-1]
            if rel and rel[0] == "bin":
                continue
            out[tuple(rel)] = os.path.join(dirpath, f)
    return out


def use_statements(text):
    """The bodies of `use ...;` statements (multi-line), tests left out."""
    # Drop `#[cfg(test)] mod tests { ... }` tails: test imports do not count.
    cut = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
    if cut:
        text = text[: cut.start()]
    text = re.sub(r"//[^\n]*", "", text)
    for m in re.finditer(r"(?:^|\n)\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
        body = re.sub(r"\s+", " ", m.group(1)).strip()
        yield re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", body)


def expand(path):
    """`a::{b,c::{d,e}}` -> [a::b, a::c::d, a::c::e]."""
    i = path.find("{")
    if i < 0:
        return [path]
    depth, j = 0, i
    for j in range(i, len(path)):
        depth += path[j] == "{"
        depth -= path[j] == "}"
        if depth == 0:
            break
    head, inner, tail = path[:i], path[i + 1 : j], path[j + 1 :]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    out = []
    for p in parts:
        if p:
            out.extend(expand(head + p + tail))
    return out


def target(mods, current, path):
    """The file a use path names, or None (another crate, or itself)."""
    segs = [s.split(" as ")[0].strip() for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = current
        rest = segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    else:
        return None
    best = None
    for n in range(len(rest), -1, -1):
        key = base + tuple(rest[:n])
        if key in mods:
            best = key
            break
    return best


def graph(src):
    mods = modules(src)
    edges = {k: set() for k in mods}
    for key, file in mods.items():
        current = key
        text = open(file, encoding="utf-8").read()
        for stmt in use_statements(text):
            for p in expand(stmt):
                t = target(mods, current, p)
                if t is not None and t != key:
                    edges[key].add(t)
    return mods, edges


def circles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=0)
    ap.add_argument("dirs", nargs="*")
    args = ap.parse_args()
    dirs = args.dirs or sorted(
        os.path.join(d, "src")
        for base in ("crates", ".")
        for d in (
            [os.path.join(ROOT, base, x) for x in os.listdir(os.path.join(ROOT, base))]
            if base == "crates"
            else [os.path.join(ROOT, x) for x in ("server", "app", "agent", "frontend", "migrations")]
        )
        if os.path.isdir(os.path.join(d, "src"))
    )
    total = 0
    for src in dirs:
        mods, edges = graph(src)
        for comp in circles(edges):
            total += 1
            files = [os.path.relpath(mods[k], ROOT) for k in comp]
            print(f"{len(files)} files: " + " -> ".join(files))
    print(f"{total} import circle(s)")
    return 1 if total > args.max else 0


if __name__ == "__main__":
    sys.exit(main())

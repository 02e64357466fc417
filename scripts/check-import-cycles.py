#!/usr/bin/env python3
"""Fails when the files of a crate import each other in a circle.

A file imports another when it names an item of the other's module: in a `use` declaration or in
a path in its code (`crate::a::b`, `super::x`, `self::m::y`, or `m::y` for a module `m` the file
declares). The edges are read from the text, without compiling: test modules (`#[cfg(test)] mod
… { … }`) are left out, since a test beside its code may use anything. Every cycle found is
printed as a chain of files; the exit code is 1 when there is one.

    scripts/check-import-cycles.py            # every crate of the workspace
    scripts/check-import-cycles.py crates/core   # one crate (a folder holding src/ or Cargo.toml)
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def crate_roots(args):
    if args:
        return [Path(a).resolve() for a in args]
    roots = [ROOT] + sorted(p.parent for p in ROOT.glob("crates/*/Cargo.toml"))
    return [r for r in roots if (r / "src").is_dir()]


def module_path(src: Path, file: Path):
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    if parts and parts[0] == "bin":
        return None
    return tuple(parts)


def strip_comments_and_tests(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def expand_use_tree(tree: str):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (each as a list of segments)."""
    tree = re.sub(r"\s+", "", tree)

    def parse(s, prefix):
        paths, depth, start = [], 0, 0
        items = []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:k])
                start = k + 1
        items.append(s[start:])
        for item in filter(None, items):
            brace = item.find("{")
            if brace >= 0:
                head = [p for p in item[:brace].split("::") if p]
                paths += parse(item[brace + 1 : item.rindex("}")], prefix + head)
            else:
                name = re.split(r"\bas\b", item)[0] if "as" in item else item
                paths.append(prefix + [p for p in name.split("::") if p])
        return paths

    return parse(tree, [])


def reexports_of(text: str):
    """`pub use a::b::Name;` -> {"Name": [a, b, Name]}: a facade's names, followed to where they live."""
    names = {}
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
        for path in expand_use_tree(m.group(1)):
            if path and path[-1] != "*":
                names[path[-1]] = path
    return names


def paths_of(text: str):
    uses = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        uses += expand_use_tree(m.group(1))
    body = re.sub(r"\buse\s+[^;]+;", "", text)
    inline = [p.split("::") for p in re.findall(rf"\b{IDENT}(?:::{IDENT})+", body)]
    return uses + inline


def resolve(segments, here, children, modules, reexports, depth=0):
    """The module file a path points into, as a module path, or None when it leaves the crate.

    A name that a module only re-exports (`pub use child::Name`) resolves to where it lives."""
    head = segments[0]
    if head == "crate":
        target, rest = (), segments[1:]
    elif head == "self":
        target, rest = here, segments[1:]
    elif head == "super":
        target, rest = here[:-1], segments[1:]
        while rest and rest[0] == "super":
            target, rest = target[:-1], rest[1:]
    elif head in children:
        target, rest = here, segments
    else:
        return None
    rest = list(rest)
    while rest and target + (rest[0],) in modules:
        target, rest = target + (rest[0],), rest[1:]
    facade = reexports.get(target, ({}, set()))
    if rest and rest[0] in facade[0] and depth < 8:
        return resolve(facade[0][rest[0]], target, facade[1], modules, reexports, depth + 1)
    return target


def cycles_in(root: Path):
    src = root / "src"
    files = {}
    for f in sorted(src.rglob("*.rs")):
        mp = module_path(src, f)
        if mp is not None and mp not in files:
            files[mp] = f
    modules = set(files)
    edges = {mp: set() for mp in files}
    texts = {mp: strip_comments_and_tests(f.read_text()) for mp, f in files.items()}
    kids = {mp: set(re.findall(rf"\bmod\s+({IDENT})\s*;", t)) for mp, t in texts.items()}
    reexports = {mp: (reexports_of(t), kids[mp]) for mp, t in texts.items()}
    for mp, text in texts.items():
        for segs in paths_of(text):
            target = resolve(segs, mp, kids[mp], modules, reexports)
            if target is not None and target in modules and target != mp:
                edges[mp].add(target)
    # Tarjan's strongly connected components.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

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
                comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [(comp, edges) for comp in comps], files


def main():
    failed = False
    for root in crate_roots(sys.argv[1:]):
        found, files = cycles_in(root)
        count = len(files)

        def rel(mp):
            return str(files[mp].relative_to(root))

        name = str(root.relative_to(ROOT)) if root.is_relative_to(ROOT) and root != ROOT else str(root) if root != ROOT else "."
        if not found:
            print(f"{name}: {count} files, no import circle")
        for comp, edges in found:
            failed = True
            print(f"{name}: import circle between {len(comp)} files:")
            members = set(comp)
            for m in sorted(comp):
                for t in sorted(edges[m] & members):
                    print(f"    {rel(m)} -> {rel(t)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

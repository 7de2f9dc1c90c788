#!/usr/bin/env python3
"""List every Rust `fn` in src/ and crates/*/src/ longer than a limit (default 80 lines).

A function's length counts from its `fn` line to the line of its closing brace. A function
with a `// Long because: ...` comment in the lines just above it (among its doc comments and
attributes) is listed as excused. The same rule is checked by a unit test of the root package
(src/long_functions.rs), which fails on any unexcused function.

Usage: devtools/long_functions.py [--limit N] [--all] [ROOT]
  --all   also list the excused functions
"""

import argparse
import pathlib
import re
import sys

EXCUSE = "// Long because:"


def blank_out(src: str) -> str:
    """The source with comments, strings and char literals replaced by spaces (newlines kept)."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not is_ident(src[i - 1])):
            close = '"' + m.group(1)
            j = src.find(close, m.end())
            j = n if j < 0 else j + len(close)
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', '{') or a lifetime ('a, 'static).
            m = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'").match(src, i)
            if m:
                blank(i, m.end())
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def is_ident(c: str) -> bool:
    return c.isalnum() or c == "_"


FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def functions(src: str):
    """(name, first line, last line) of every fn with a body, nested ones included (1-based)."""
    code = blank_out(src)
    for m in FN.finditer(code):
        # The body's opening brace: the first `{` outside parentheses and brackets, unless a `;`
        # (a declaration without a body) comes first.
        depth, j = 0, m.end()
        while j < len(code):
            c = code[j]
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            elif depth == 0 and c in "{;":
                break
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        braces, k = 0, j
        while k < len(code):
            if code[k] == "{":
                braces += 1
            elif code[k] == "}":
                braces -= 1
                if braces == 0:
                    break
            k += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, k) + 1
        yield m.group(1), first, last


def excused(lines, first: int) -> bool:
    """Whether a `// Long because:` comment sits above line `first` (1-based), among the
    comments, doc comments and attributes directly before the function."""
    k = first - 2
    while k >= 0:
        text = lines[k].strip()
        if text.startswith(EXCUSE):
            return True
        if not (text.startswith("//") or text.startswith("#[") or text.startswith("#![")):
            return False
        k -= 1
    return False


def sources(root: pathlib.Path):
    dirs = [root / "src"] + sorted(p / "src" for p in (root / "crates").iterdir() if p.is_dir())
    for d in dirs:
        yield from sorted(d.rglob("*.rs"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--all", action="store_true", help="also list excused functions")
    ap.add_argument("root", nargs="?", default=pathlib.Path(__file__).resolve().parent.parent)
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    unexcused = 0
    for path in sources(root):
        src = path.read_text()
        lines = src.splitlines()
        for name, first, last in functions(src):
            length = last - first + 1
            if length <= args.limit:
                continue
            ok = excused(lines, first)
            unexcused += not ok
            if args.all or not ok:
                mark = " (long because)" if ok else ""
                print(f"{path.relative_to(root)}:{first}: {name} {length}{mark}")
    return 1 if unexcused else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fails when a Markdown page of the tree looks as if a code formatter ran over it.

    check_markdown.py --root <source dir> [page.md ...]

clang-format treats any file it is given as C++: a Markdown page comes out with
`# Title` as `#Title`, table rows indented and run together, `docs/x.md` as
`docs / x.md`, and sentences joined at their full stop. The page still renders
something, and its ```cpp blocks still compile (cmake/DocSnippets.cmake), so
nothing else would notice. Outside fenced code blocks and multi-line HTML
comments, this flags, as page:line:
  - a heading without a space after its #s,
  - a table row indented by more than four spaces,
  - a link target with " / " in it,
  - outside `code spans`, a full stop with a capitalised word glued to it
    ("means.After the wait").
With no pages given, every *.md under --root (build*/, .git/ and node_modules/
left out). The ctest test style.markdown_shape runs it (docs/style.md, "Size").
"""
import argparse
import pathlib
import re
import sys

SKIPPED = re.compile(r"(^|/)(build[^/]*|\.git|node_modules)/")
CHECKS = (
    (re.compile(r"^#+[^#\s]"), "a heading without a space after #"),
    (re.compile(r"^\s{5,}\|.*\|\s*$"), "a table row indented"),
    (re.compile(r"\]\([^)\s]* / [^)]*\)"), "a link with ' / ' in it"),
)
GLUED = re.compile(r"[a-z)]\.[A-Z][a-z]+ [a-z]")


def Problems(page, text):
    fence = None
    in_comment = False
    for number, line in enumerate(text.splitlines(), 1):
        opening = re.match(r"^\s*(```+|~~~+)", line)
        if opening:
            if fence is None:
                fence = opening.group(1)[:3]
            elif opening.group(1).startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        if in_comment:
            in_comment = "-->" not in line
            continue
        if "<!--" in line and "-->" not in line.split("<!--", 1)[1]:
            in_comment = True
            continue
        why = next((w for pattern, w in CHECKS if pattern.search(line)), None)
        if why is None and GLUED.search(re.sub(r"`[^`]*`", "", line)):
            why = "sentences run together"
        if why is not None:
            yield f"{page}:{number}: {why}: {line.strip()[:80]}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("pages", nargs="*")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    pages = args.pages or sorted(
        str(p.relative_to(root)) for p in root.rglob("*.md")
        if not SKIPPED.search(str(p.relative_to(root))))
    found = []
    for page in pages:
        text = (root / page).read_text(encoding="utf-8", errors="replace")
        found.extend(Problems(page, text))
    if found:
        print("Markdown that a code formatter seems to have rewritten "
              "(restore the page from git):", file=sys.stderr)
        print("\n".join(found), file=sys.stderr)
        return 1
    print(f"{len(pages)} pages look like Markdown")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Turns the ```cpp blocks of one Markdown page into a C++ translation unit.

    extract_snippets.py --root <source dir> --page docs/policies.md --out <file.cc>
                        [--have fusebox::yaml spdlog::spdlog ...]

The build (cmake/DocSnippets.cmake, target fusebox_doc_snippets) compiles the
result, so that the code in README.md and docs/*.md cannot drift from the API.
Every ```cpp block must be preceded (blank lines between are allowed) by one of
two markers, documented in CONTRIBUTING.md ("Code in the docs"):

    <!-- compile includes="fusebox/pipeline.h <vector>" requires="fusebox::yaml"
    struct Reply {};            (optional: declarations the block assumes,
    Reply Load();                up to the closing -->, never shown by Markdown)
    -->

    <!-- snippet NAME ... -->   (the block is the verbatim code of a test,
                                 checked by cmake/CheckDocSnippet.cmake)

Attributes of `compile`, all optional and all on the marker's first line:
  includes  headers, space-separated; "fusebox/x.h" is written #include "...",
            "<x>" as is.
  scope     "function" (default): the block is the body of a function
            returning int; "file": the block is at namespace scope.
  requires  build targets the block needs (a module); when one is not built
            (not among --have) the block is left out, saying so.

A block's own #include lines are moved to the top of the TU. Each block lands
in a namespace of its own, after a #line directive, so that a
compiler error names the page and the line of the block. A block without a
marker, or a marker that cannot be read, fails with "page:line: ..." and exit
status 1. The page's TU includes the headers of all its blocks.
"""

import argparse
import re
import shlex
import sys

FENCE_OPEN = re.compile(r"^```cpp\s*$")
FENCE_CLOSE = re.compile(r"^```\s*$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"][^>"]+[>"])\s*(//.*)?$')
ATTRIBUTE = re.compile(r'\s*([a-z]+)="([^"]*)"')
KNOWN_ATTRIBUTES = {"includes", "scope", "requires"}
MARKER_HELP = ('put <!-- compile includes="..." --> (or <!-- snippet NAME -->) before it; '
               'CONTRIBUTING.md, "Code in the docs"')


class SnippetError(Exception):
    pass


def find_marker(lines, fence_index):
    """The marker before the fence at fence_index: (kind, first line index,
    attribute line, prelude lines), or None."""
    i = fence_index - 1
    while i >= 0 and not lines[i].strip():
        i -= 1
    if i < 0 or not lines[i].rstrip().endswith("-->"):
        return None
    end = i
    while i >= 0 and "<!--" not in lines[i]:
        i -= 1
    if i < 0:
        return None
    start = i
    head = lines[start][lines[start].index("<!--") + 4:]
    body = lines[start + 1:end + 1]
    if start == end:
        head = head[:head.rindex("-->")]
        body = []
    else:
        body[-1] = body[-1][:body[-1].rindex("-->")]
    words = head.split(None, 1)
    if not words:
        return None
    return words[0], start, head[len(words[0]) + head.index(words[0]):], body


def parse_attributes(text, page, line_number):
    attributes = {}
    rest = text.strip()
    while rest:
        m = ATTRIBUTE.match(rest)
        if not m:
            raise SnippetError(f"{page}:{line_number}: cannot read the compile marker at "
                               f"'{rest}' (attributes are name=\"value\")")
        name, value = m.group(1), m.group(2)
        if name not in KNOWN_ATTRIBUTES:
            raise SnippetError(f"{page}:{line_number}: unknown attribute '{name}' "
                               f"(known: {', '.join(sorted(KNOWN_ATTRIBUTES))})")
        attributes[name] = value
        rest = rest[m.end():].strip()
    scope = attributes.get("scope", "function")
    if scope not in ("function", "file"):
        raise SnippetError(f"{page}:{line_number}: scope=\"{scope}\": 'function' or 'file'")
    return attributes


def include_line(header):
    if header.startswith("<") and header.endswith(">"):
        return f"#include {header}"
    return f'#include "{header}"'


def extract(page, text, have):
    """The generated C++ of one page; raises SnippetError."""
    lines = text.split("\n")
    includes = []
    blocks = []
    errors = []
    i = 0
    while i < len(lines):
        if not FENCE_OPEN.match(lines[i]):
            i += 1
            continue
        fence = i
        j = i + 1
        while j < len(lines) and not FENCE_CLOSE.match(lines[j]):
            j += 1
        if j == len(lines):
            errors.append(f"{page}:{fence + 1}: ```cpp block never closed")
            break
        i = j + 1
        marker = find_marker(lines, fence)
        if marker is None or marker[0] not in ("compile", "snippet"):
            errors.append(f"{page}:{fence + 1}: ```cpp block without a marker: {MARKER_HELP}")
            continue
        kind, marker_index, head, prelude = marker
        if kind == "snippet":
            continue
        try:
            attributes = parse_attributes(head, page, marker_index + 1)
        except SnippetError as e:
            errors.append(str(e))
            continue
        missing = [t for t in attributes.get("requires", "").split() if t not in have]
        headers = shlex.split(attributes.get("includes", ""))
        # The block's own #include lines go to the top of the TU (a blank line
        # stays, so that the lines keep their numbers).
        code = lines[fence + 1:j]
        for n, line in enumerate(code):
            m = INCLUDE.match(line)
            if m:
                headers.append(m.group(1).strip('"'))
                code[n] = ""
        for header in headers:
            if not missing and header not in includes:
                includes.append(header)
        blocks.append({
            "line": fence + 1,
            "scope": attributes.get("scope", "function"),
            "missing": missing,
            "prelude_line": marker_index + 2,
            "prelude": prelude,
            "code_line": fence + 2,
            "code": code,
        })
    if errors:
        raise SnippetError("\n".join(errors))

    out = [f"// Generated by tools/docs/extract_snippets.py from {page}: do not edit.",
           f"// {sum(1 for b in blocks if not b['missing'])} ```cpp block(s) compiled; "
           "see CONTRIBUTING.md, \"Code in the docs\"."]
    out += [include_line(h) for h in includes]
    for b in blocks:
        out.append("")
        if b["missing"]:
            out.append(f"// {page}:{b['line']}: left out, needs {' '.join(b['missing'])} "
                       "(not built)")
            continue
        out.append(f"namespace fusebox_doc_snippet_line_{b['line']} {{")
        if any(s.strip() for s in b["prelude"]):
            out.append(f'#line {b["prelude_line"]} "{page}"')
            out += b["prelude"]
        if b["scope"] == "function":
            out.append("int Snippet() {")
        out.append(f'#line {b["code_line"]} "{page}"')
        out += b["code"]
        if b["scope"] == "function":
            out.append("  return 0;")
            out.append("}")
        out.append(f"}}  // namespace fusebox_doc_snippet_line_{b['line']}")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="the source directory")
    parser.add_argument("--page", required=True, help="the page, relative to --root")
    parser.add_argument("--out", required=True, help="the .cc file to write")
    parser.add_argument("--have", nargs="*", default=[], help="build targets that exist")
    args = parser.parse_args()
    try:
        with open(f"{args.root}/{args.page}", encoding="utf-8") as f:
            text = f.read()
        generated = extract(args.page, text, set(args.have))
    except (OSError, UnicodeDecodeError) as e:
        print(f"{args.page}: {e}", file=sys.stderr)
        return 1
    except SnippetError as e:
        print(e, file=sys.stderr)
        return 1
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(generated)
    return 0


if __name__ == "__main__":
    sys.exit(main())

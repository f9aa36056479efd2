#!/usr/bin/env python3
"""The repository's layout, checked: sizes and dependencies that reviews
kept finding by hand.

Run from anywhere:

    python3 scripts/check_layout.py [REPOSITORY]

(REPOSITORY: the work tree to check, by default the one holding this
script). It prints one line per violation on stdout, a count on stderr,
and exits 1 when there is any; otherwise it prints `layout: ok (N files)`
and exits 0. It checks the C files git
tracks (`git ls-files '*.c' '*.h'`), except those under tests/:

- a file over MAX_FILE_LINES lines;
- a function over MAX_FUNCTION_LINES lines (from its first line to its
  closing brace), except the few in LONG_SWITCHES;
- two files of different modules that include each other. A file and the
  header of the same name are one unit (x.c and x.h), so x.c including y.h
  while y.c includes x.h is a circle too;
- a file in analyzers/rules/ that includes a header outside the rule API,
  the planner, the catalog and protocol/: the engine reaches rules only
  through analyzers/rules/rule_api.h.

A module is a folder: protocol, analyzers/engine, analyzers/rules,
analyzers/planner, analyzers/catalog, report, proxy/<sub> (and proxy itself
for the files at its top).

Standard library only, so it runs before anything is installed.
"""

import os
import re
import subprocess
import sys

MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 80

# Functions allowed to be long: each is one switch over the BSON element
# types (or, for shapes, the scalar types), one case a type, and splitting
# it would scatter one table over several functions or put a call on a
# per-element path.
LONG_SWITCHES = {
    ("protocol/wire_doc.c", "walk"),  # the structural check's one pass
    ("protocol/wire_iter.c", "wire_iter_next_any"),  # an element's extent
    ("analyzers/engine/shape.c", "render_verbatim_scalar"),  # a literal's text
    ("analyzers/rules/rule_doc.c", "raw_next"),  # large-document's raw walk
}

# What a rule file may include besides its own folder (rule_api.h itself
# is the one door to the engine).
RULE_INCLUDES = ("analyzers/rules/", "analyzers/planner/", "analyzers/catalog/", "protocol/")
RULE_API = "analyzers/rules/rule_api.h"

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ATTRIBUTE_RE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
NAME_RE = re.compile(r"([A-Za-z_]\w*)\s*\(")


def module_of(path):
    parts = path.split("/")
    if parts[0] in ("analyzers", "proxy") and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def unit_of(path):
    """x.c and x.h are one unit."""
    return os.path.splitext(path)[0]


def tracked_files(root):
    out = subprocess.run(
        ["git", "ls-files", "*.c", "*.h"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [p for p in out.split("\n") if p and not p.startswith("tests/")]


def signature_start(lines, brace):
    """The first line of the definition whose body opens at lines[brace]:
    back over the lines up to a blank one, a comment's end, a directive
    or the end of something else."""
    i = brace - 1
    while i >= 0:
        s = lines[i].rstrip()
        if (
            not s
            or s.endswith("*/")
            or s.endswith(";")
            or s.endswith("}")
            or s.startswith("#")
            or s.lstrip().startswith("//")
        ):
            break
        i -= 1
    return i + 1


def function_name(signature):
    text = ATTRIBUTE_RE.sub(" ", signature)
    m = NAME_RE.search(text)
    return m.group(1) if m else None


def functions(lines):
    """(name, first line, length) of each function definition. The
    formatter (BreakBeforeBraces: Linux) puts a function's opening brace
    alone in column 0 and its closing one too; nothing else is written
    that way."""
    i = 0
    n = len(lines)
    while i < n:
        if lines[i].rstrip() != "{":
            i += 1
            continue
        start = signature_start(lines, i)
        name = function_name(" ".join(lines[start:i]))
        end = i + 1
        while end < n and not lines[end].startswith("}"):
            end += 1
        if name:
            yield name, start + 1, end - start + 1
        i = end + 1


def main(argv):
    where = argv[1] if len(argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    root = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        cwd=where,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    files = tracked_files(root)
    known = set(files)
    violations = []
    includes = {}  # unit -> {unit it includes: (file, header)}

    for path in files:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) > MAX_FILE_LINES:
            violations.append(f"{path}: {len(lines)} lines (at most {MAX_FILE_LINES})")
        for name, first, length in functions(lines):
            if length > MAX_FUNCTION_LINES and (path, name) not in LONG_SWITCHES:
                violations.append(
                    f"{path}:{first}: function {name} is {length} lines"
                    f" (at most {MAX_FUNCTION_LINES})"
                )
        in_rules = path.startswith("analyzers/rules/") and path != RULE_API
        for line in lines:
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            header = m.group(1)
            if header in known:
                includes.setdefault(unit_of(path), {}).setdefault(unit_of(header), (path, header))
            if in_rules and header != RULE_API and not header.startswith(RULE_INCLUDES):
                violations.append(
                    f"{path}: includes {header}: a rule file includes only {RULE_API}"
                    " and headers of analyzers/rules, planner, catalog and protocol"
                )

    seen = set()
    for a, targets in sorted(includes.items()):
        for b, (file_a, header_b) in sorted(targets.items()):
            if a == b or module_of(a) == module_of(b) or (b, a) in seen:
                continue
            back = includes.get(b, {}).get(a)
            if back:
                seen.add((a, b))
                violations.append(
                    f"{file_a}: includes {header_b}, and {back[0]} includes {back[1]}:"
                    f" modules {module_of(a)} and {module_of(b)} include each other"
                )

    for v in violations:
        print(v)
    if violations:
        print(f"layout: {len(violations)} violation(s) ({len(files)} files)", file=sys.stderr)
        return 1
    print(f"layout: ok ({len(files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

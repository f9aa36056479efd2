#!/usr/bin/env python3
"""Keeps "one file, one id, one row" (analyzers/rules/rules.h) true.

Everything about a rule lives in the rule's own file and reaches the rest
of the program through the rule table. So no C code outside that file and
analyzers/rules/rules.c / rules.h may name one particular rule: neither its
id as a string literal ("unbounded-push") nor its rule_id value
(RULE_UNBOUNDED_PUSH). Iterating over rule_table is how the rest of the
code speaks of rules.

The rules are read from the rule files' own definitions (a `const rule_def`
with `.id = RULE_...` and `.name = "..."`), never from a list kept here.
A rule's own files are the one defining it and the header of the same
name (rule_push.c, rule_push.h). Comments are not checked: they may name
a rule to say why. Tests (tests/) and documentation are exempt.

With --strict, an id inside a longer string literal (a log message naming
a rule) counts too.

Usage: scripts/check_rule_ids.py [--strict] [REPO]   (REPO: the repository
root, by default the parent of this script's folder). Exit 0 and one
summary line when clean; exit 1 with one `file:line: ...` line per
violation otherwise; exit 2 when no rule definition is found.
"""
import os
import re
import sys

RULES_DIR = os.path.join("analyzers", "rules")
TABLE_FILES = {os.path.join(RULES_DIR, "rules.c"), os.path.join(RULES_DIR, "rules.h")}
SKIP_DIRS = {"tests", "docs", "node_modules"}

DEF_RE = re.compile(r"\bconst\s+rule_def\s+\w+\s*=\s*\{(.*?)\n\};", re.S)
ID_RE = re.compile(r"\.id\s*=\s*(RULE_[A-Z0-9_]+)")
NAME_RE = re.compile(r'\.name\s*=\s*"([^"]+)"')


def code_tokens(text):
    """Yields (line, kind, value) for each string literal and identifier of
    C source, comments skipped. kind is 'str' or 'ident'."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
        elif c in "\"'":
            start, start_line = i + 1, line
            i += 1
            while i < n and text[i] != c and text[i] != "\n":
                i += 2 if text[i] == "\\" else 1
            if c == '"':
                yield start_line, "str", text[start:i]
            i += 1
        elif c.isalpha() or c == "_":
            start = i
            while i < n and (text[i].isalnum() or text[i] == "_"):
                i += 1
            yield line, "ident", text[start:i]
        else:
            i += 1


def find_rules(root):
    """{rule_id value: (id string, own files)} from the rule files."""
    rules = {}
    folder = os.path.join(root, RULES_DIR)
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".c"):
            continue
        rel = os.path.join(RULES_DIR, name)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for body in DEF_RE.findall(text):
            ident, rid = ID_RE.search(body), NAME_RE.search(body)
            if ident and rid:
                own = {rel, rel[:-2] + ".h"}
                rules[ident.group(1)] = (rid.group(1), own)
    return rules


def c_files(root):
    for d, dirs, files in os.walk(root):
        rel_d = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "build")) and
                         not (rel_d == "." and x in SKIP_DIRS) and x not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith((".c", ".h")):
                yield os.path.normpath(os.path.join(rel_d, name))


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv if a != "--strict"]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rules = find_rules(root)
    if not rules:
        print(f"rule ids: no rule_def found under {os.path.join(root, RULES_DIR)}")
        return 2
    by_id = {rid: (enum, own) for enum, (rid, own) in rules.items()}
    token_re = re.compile(r"(?<![A-Za-z0-9_-])(" + "|".join(
        re.escape(r) for r in sorted(by_id, key=len, reverse=True)) + r")(?![A-Za-z0-9_-])")
    violations, nfiles = [], 0
    for rel in c_files(root):
        nfiles += 1
        if rel in TABLE_FILES:
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line, kind, value in code_tokens(text):
            if kind == "ident" and value in rules and rel not in rules[value][1]:
                violations.append(f"{rel}:{line}: names rule {rules[value][0]} by its "
                                  f"rule_id {value}: read it from rule_table instead")
            elif kind == "str":
                hits = [value] if value in by_id else (
                    token_re.findall(value) if strict else [])
                for rid in hits:
                    if rel not in by_id[rid][1]:
                        violations.append(f"{rel}:{line}: names rule {rid} by its id "
                                          f"string: read it from rule_table instead")
    for v in violations:
        print(v)
    if violations:
        print(f"rule ids: {len(violations)} violations ({len(rules)} rules, {nfiles} files)")
        return 1
    print(f"rule ids: ok ({len(rules)} rules, {nfiles} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

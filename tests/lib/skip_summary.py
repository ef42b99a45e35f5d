#!/usr/bin/env python3
"""Names every test ctest skipped, and why, from ctest's JUnit reports.

Usage: skip_summary.py HEADLINE TREE=JUNIT.xml [TREE=JUNIT.xml ...]

Each JUNIT.xml is what `ctest --output-junit` wrote for one build tree. A
skipped test is a testcase with a <skipped> element: a script that exited
with its SKIP_RETURN_CODE (77), or a gtest case that called GTEST_SKIP()
(an entry of its own: tests/lib/gtest_entries.py marks "[  SKIPPED ]" as
a skip). A gtest case skipped inside an entry that ran several passes that
entry: it is found by its "[  SKIPPED ] NAME (T ms)" line in the output. Its
reason is the script's "SKIP: ..." line, or the message gtest printed after
"Skipped".

Prints one line per skipped test and reason (with the trees it was skipped
in), then the summary line: HEADLINE, then "nothing skipped" or the count
and names. A missing report is an error (exit 1): the summary must not claim
what no run showed.
"""
import sys
import xml.etree.ElementTree as ET


def reason_of(output):
    lines = [l.strip() for l in output.splitlines()]
    # A script's own word: the last "SKIP: ..." line.
    for l in reversed(lines):
        if l.startswith("SKIP:"):
            return l[len("SKIP:"):].strip()
    # gtest: "file:line: Skipped" then the streamed message, up to the
    # "[  SKIPPED ]" line.
    for i, l in enumerate(lines):
        if l.endswith(": Skipped") or l == "Skipped":
            message = []
            for m in lines[i + 1:]:
                if m.startswith("[  SKIPPED ]") or m.startswith("[       OK ]"):
                    break
                if m:
                    message.append(m)
            if message:
                return " ".join(message)
    last = [l for l in lines if l]
    return last[-1] if last else "(no reason given)"


def gtest_skips(output):
    """[(test name, reason)] of the gtest cases that called GTEST_SKIP in an
    entry that ran several (tests/lib/gtest_entries.py): each case's lines
    from "[ RUN      ] NAME" to "[  SKIPPED ] NAME (T ms)"."""
    out, start = [], None
    lines = output.splitlines()
    for i, l in enumerate(lines):
        if l.startswith("[ RUN      ] "):
            start = i
        elif l.startswith("[  SKIPPED ] ") and l.endswith(" ms)") and start is not None:
            name = l[len("[  SKIPPED ] "):].rsplit(" (", 1)[0]
            out.append((name, reason_of("\n".join(lines[start:i + 1]))))
            start = None
    return out


def skipped_in(path):
    """[(test name, reason)] of one JUnit report."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("skipped") is None:
            out += gtest_skips(case.findtext("system-out") or "")
            continue
        text = case.findtext("system-out") or ""
        # gtest_discover_tests appends "  # GetParam() = ..." to a
        # parameterized case's name; the name before it is the test's.
        name = case.get("name").split("  # ")[0]
        out.append((name, reason_of(text)))
    return out


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    headline = argv[1]
    found = {}  # (name, reason) -> [tree, ...]
    for arg in argv[2:]:
        tree, sep, path = arg.partition("=")
        if not sep:
            sys.stderr.write(f"skip_summary.py: expected TREE=JUNIT.xml, got {arg}\n")
            return 2
        try:
            cases = skipped_in(path)
        except (OSError, ET.ParseError) as e:
            sys.stderr.write(f"skip_summary.py: no readable ctest report for {tree} ({path}): {e}\n")
            return 1
        for name, reason in cases:
            found.setdefault((name, reason), []).append(tree)
    for (name, reason), trees in sorted(found.items()):
        print(f"skipped: {name} [{', '.join(trees)}]: {reason}")
    names = sorted({name for name, _ in found})
    if names:
        print(f"{headline}; {len(names)} skipped (reasons above): {', '.join(names)}")
    else:
        print(f"{headline}; nothing skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

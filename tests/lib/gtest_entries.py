#!/usr/bin/env python3
"""Writes the ctest entries of a GoogleTest program, a few tests per entry.

Usage: gtest_entries.py PROGRAM OUT.cmake WORKING_DIR CHUNK [OWN_TEST ...]

ctest starts one process per entry. One entry per test (what
gtest_discover_tests makes) pays a process start per test: ~1,000 per tree,
0.1 s of CPU each under AddressSanitizer, a minute of `make test` in all.
Here consecutive tests of one suite share an entry, CHUNK at most: the entry
SUITE when one holds the whole suite, else SUITE[1], SUITE[2], ... in gtest's
order. Each OWN_TEST keeps an entry of its own named as gtest names it
(Suite.Test), so `ctest -R/-E Suite.Test` still selects it (the Makefile's
TSAN_SKIP does), and is costed to start first: those are the tests that run
for seconds, which then overlap the short ones instead of ending the run.

A test that calls GTEST_SKIP passes a shared entry; tests/lib/skip_summary.py
names it, and its reason, from the entry's output. An own entry is marked
skipped as gtest_discover_tests marks it. Disabled tests (DISABLED_) get no
entry: the tests that run them start them explicitly.
"""
import subprocess
import sys


def listed_tests(program):
    """Full test names in gtest's order, as --gtest_list_tests prints them."""
    out = subprocess.run([program, "--gtest_list_tests"], capture_output=True, text=True, check=True).stdout
    suites, suite = {}, None
    for line in out.splitlines():
        if not line.strip() or line.startswith("Running main()"):
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip().rstrip(".")
            suites.setdefault(suite, [])
            continue
        test = line.split("#")[0].strip()
        if suite is None:
            raise ValueError(f"test {test!r} listed before any suite")
        if "DISABLED_" not in suite and not test.startswith("DISABLED_"):
            suites[suite].append(f"{suite}.{test}")
    return suites


# gtest's line for a skipped case, as a ctest regular expression.
GTEST_SKIPPED = r"\[  SKIPPED \]"


def bracket(text):
    """A CMake bracket argument holding text verbatim."""
    level = "="
    while f"]{level}]" in text:
        level += "="
    return f"[{level}[{text}]{level}]"


def entry(name, program, working_dir, tests, own):
    lines = [f"add_test({bracket(name)} {bracket(program)} {bracket('--gtest_filter=' + ':'.join(tests))})"]
    props = [f"WORKING_DIRECTORY {bracket(working_dir)}"]
    if own:
        props += ["COST 1000", "SKIP_REGULAR_EXPRESSION " + bracket(GTEST_SKIPPED)]
    lines.append(f"set_tests_properties({bracket(name)} PROPERTIES {' '.join(props)})")
    return lines


def main(argv):
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 2
    program, out_path, working_dir, chunk, own_tests = argv[1], argv[2], argv[3], int(argv[4]), set(argv[5:])
    if chunk < 1:
        sys.stderr.write(f"gtest_entries.py: CHUNK must be at least 1, got {chunk}\n")
        return 2
    suites = listed_tests(program)
    listed = {t for tests in suites.values() for t in tests}
    missing = sorted(own_tests - listed)
    if missing:
        sys.stderr.write(f"gtest_entries.py: {program} has no test {', '.join(missing)} (named as an own entry)\n")
        return 1
    lines = []
    for suite, tests in suites.items():
        lines += [l for t in tests if t in own_tests for l in entry(t, program, working_dir, [t], True)]
        shared = [t for t in tests if t not in own_tests]
        chunks = [shared[i:i + chunk] for i in range(0, len(shared), chunk)]
        for k, part in enumerate(chunks, 1):
            lines += entry(suite if len(chunks) == 1 else f"{suite}[{k}]", program, working_dir, part, False)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Checks skip_summary.py on JUnit reports shaped as ctest 3.25 writes them:
a script that exited 77, a gtest case that called GTEST_SKIP in an entry of
its own (with gtest_discover_tests' "  # GetParam() = ..." name suffix) and
one in an entry of several (tests/lib/gtest_entries.py), a passed test;
and that a missing report is an error, not "nothing skipped"."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="3" failures="0" disabled="0" skipped="2" hostname="" time="0">
\t<testcase name="netsim" classname="netsim" time="0.01" status="notrun">
\t\t<skipped message="SKIP_RETURN_CODE=77"/>
\t\t<system-out>netsim: checking
SKIP: not root (network namespaces need CAP_SYS_ADMIN)
</system-out>
\t</testcase>
\t<testcase name="Levels/VecRows.RopeRotations/avx512  # GetParam() = 4-byte object &lt;01-00 00-00&gt;" classname="x" time="0" status="notrun">
\t\t<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
\t\t<system-out>Running main() from gtest_main.cc
[ RUN      ] Levels/VecRows.RopeRotations/avx512
/src/tests/cpu/simd_levels.h:73: Skipped
AVX-512 kernels not checked: this CPU lacks avx512f, avx512bw

[  SKIPPED ] Levels/VecRows.RopeRotations/avx512 (0 ms)
</system-out>
\t</testcase>
\t<testcase name="Levels/VecMath" classname="z" time="0.1" status="run">
\t\t<system-out>[ RUN      ] Levels/VecMath.Exp/avx2
[       OK ] Levels/VecMath.Exp/avx2 (1 ms)
[ RUN      ] Levels/VecMath.Exp/avx512
/src/tests/cpu/simd_levels.h:73: Skipped
AVX-512 kernels not checked: this CPU lacks avx512f

[  SKIPPED ] Levels/VecMath.Exp/avx512 (0 ms)
[==========] 2 tests from 1 test suite ran. (1 ms total)
[  PASSED  ] 1 test.
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] Levels/VecMath.Exp/avx512
</system-out>
\t</testcase>
\t<testcase name="Gguf.ReadsIndependentPythonWriter" classname="y" time="0.03" status="run">
\t\t<system-out>[       OK ] Gguf.ReadsIndependentPythonWriter (30 ms)</system-out>
\t</testcase>
</testsuite>
"""

PASSED = REPORT.replace('skipped="2"', 'skipped="0"').split("\t<testcase")[0] + "</testsuite>\n"


def run(*args):
    return subprocess.run([sys.executable, os.path.join(HERE, "skip_summary.py"), *args],
                          capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as d:
        skips, clean = os.path.join(d, "skips.xml"), os.path.join(d, "clean.xml")
        with open(skips, "w") as f:
            f.write(REPORT)
        with open(clean, "w") as f:
            f.write(PASSED)
        r = run("make test: all passed", f"Release={skips}", f"ASan={skips}")
        assert r.returncode == 0, r.stderr
        want = [
            "skipped: Levels/VecMath.Exp/avx512 [Release, ASan]: AVX-512 kernels not checked: this CPU lacks avx512f",
            "skipped: Levels/VecRows.RopeRotations/avx512 [Release, ASan]: "
            "AVX-512 kernels not checked: this CPU lacks avx512f, avx512bw",
            "skipped: netsim [Release, ASan]: not root (network namespaces need CAP_SYS_ADMIN)",
            "make test: all passed; 3 skipped (reasons above): Levels/VecMath.Exp/avx512, "
            "Levels/VecRows.RopeRotations/avx512, netsim",
        ]
        assert r.stdout.splitlines() == want, r.stdout
        r = run("test-release: passed", f"Release={clean}")
        assert r.returncode == 0 and r.stdout.splitlines() == ["test-release: passed; nothing skipped"], r.stdout
        r = run("test-release: passed", f"Release={os.path.join(d, 'missing.xml')}")
        assert r.returncode == 1 and "no readable ctest report for Release" in r.stderr, (r.returncode, r.stderr)
    print("skip_summary_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# The front door. `make demo` installs what building needs, builds the weft
# tool and what it links (no tests), and runs the main job; `make test` builds and runs every test in three builds (Release,
# AddressSanitizer+UBSan, ThreadSanitizer) plus a short fuzzing run;
# `make package` builds the Debian package (docs/install.md).
.PHONY: all deps deps-build build demo test test-release test-asan test-tsan test-fuzz bench package test-package clean

JOBS ?= $(shell nproc)
LAUNCHER := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache,)
CONFIGURE = cmake -S . -G Ninja $(LAUNCHER) -Wno-dev
# Without these ccache recompiles every file that uses a precompiled header
# (the tests, the tool, weft serve) on every build: the .gch is new each time
# and may hide __DATE__ or __TIME__ (weft uses neither).
export CCACHE_SLOPPINESS ?= pch_defines,time_macros,include_file_mtime,include_file_ctime
# Sanitized trees (and the fuzz tree) look for bugs, not speed: -O1 -g1
# compiles in half the time of -O2 -g (the test files most of all) and keeps
# the line tables reports use.
SANITIZED = -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"

all: build

# Everything (tests, the fuzz tree's clang, packaging); deps-build: what the
# Release tree needs to build, for `make demo` and `make build`.
deps:
	@scripts/install-deps.sh

deps-build:
	@scripts/install-deps.sh build

build/release/build.ninja: | deps-build
	@$(CONFIGURE) -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null

build/asan/build.ninja: | deps
	@$(CONFIGURE) -B build/asan $(SANITIZED) -DWEFT_SANITIZE=address,undefined >/dev/null

build/tsan/build.ninja: | deps
	@$(CONFIGURE) -B build/tsan $(SANITIZED) -DWEFT_SANITIZE=thread >/dev/null

# The Debian package's tree: installs to /usr, with the worker service.
build/package/build.ninja: | deps
	@$(CONFIGURE) -B build/package -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DWEFT_INSTALL_SERVICE=ON \
	  >/dev/null

build/fuzz/build.ninja: | deps
	@$(CONFIGURE) -B build/fuzz $(SANITIZED) -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DWEFT_FUZZ=ON \
	  >/dev/null

build: deps-build build/release/build.ninja
	@cmake --build build/release -j $(JOBS)

# Every ctest run writes a JUnit report (build/TREE/ctest-junit.xml);
# tests/lib/skip_summary.py names each skipped test and its reason from them
# (scripts that exit 77, gtest cases that call GTEST_SKIP), so a summary never
# says "passed" of a test that did not run. The interpreter: Debian's, as the
# CMake trees find it (tests/CMakeLists.txt), before any other on PATH.
comma := ,
PYTHON3 := $(or $(wildcard /usr/bin/python3),python3)
SKIPS = $(PYTHON3) tests/lib/skip_summary.py
JUNIT = --output-junit $(CURDIR)/build/$(1)/ctest-junit.xml

test: test-release test-asan test-tsan test-fuzz
	@$(SKIPS) "make test: all passed (Release, ASan+UBSan, TSan, fuzz smoke)" Release=build/release/ctest-junit.xml \
	  ASan+UBSan=build/asan/ctest-junit.xml TSan=build/tsan/ctest-junit.xml

test-release: deps build
	@rm -f build/release/ctest-junit.xml
	@ctest --test-dir build/release --output-on-failure -j $(JOBS) --timeout 600 $(call JUNIT,release)
	@$(SKIPS) "test-release: passed" Release=build/release/ctest-junit.xml

test-asan: deps build/asan/build.ninja
	@cmake --build build/asan -j $(JOBS)
	@rm -f build/asan/ctest-junit.xml
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build/asan --output-on-failure -j $(JOBS) --timeout 900 $(call JUNIT,asan)
	@$(SKIPS) "test-asan: passed" ASan+UBSan=build/asan/ctest-junit.xml

# ThreadSanitizer looks for data races alone. Its tree builds only the unit
# tests whose code runs threads (WEFT_SINGLE_THREADED_TESTS in
# tests/CMakeLists.txt lists the files left out: parsers, tokenizers,
# templates, codecs, kernels called directly). Of those, it skips the
# conformance suite's repeats over other backend mixes (minutes each under
# TSan, the same threaded code as the runs kept: check_sched_three drives the
# CPU pool, async streams and the scheduler; RpcClient.ConformanceSuiteThroughScheduler
# the RPC client and worker in one process, where TSan sees both sides, so
# check_sched_cpu_rpc, the same over a worker process, is left to the other
# trees), one quantization matrix (its threaded path has its own test), and
# the end-to-end runs of the weft tool over worker processes (demo,
# run_with_workers, netsim: minutes of model compute under TSan; the same
# client, worker and pool code runs in RpcClient.ConformanceSuiteThroughScheduler).
# tests/tsan.supp suppresses reports inside Debian's uninstrumented cpp-httplib.
TSAN_SKIP = ^(check_cpu|check_cpu_1thread|check_cpu_3threads|check_async|check_sched_cpu_async|check_sched_cpu_async_copy|check_rpc|check_sched_cpu_rpc|RpcClient\.ConformanceSuite|AsyncDevice\.PassesTheConformanceSuite|QuantizeFile\.EveryMixWritesItsPlan|demo|run_with_workers|netsim)$$
test-tsan: deps build/tsan/build.ninja
	@cmake --build build/tsan -j $(JOBS)
	@rm -f build/tsan/ctest-junit.xml
	@TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp \
	  ctest --test-dir build/tsan --output-on-failure -j $(JOBS) --timeout 900 -E '$(TSAN_SKIP)' $(call JUNIT,tsan)
	@$(SKIPS) "test-tsan: passed" TSan=build/tsan/ctest-junit.xml
	@echo "test-tsan: left out by design (TSAN_SKIP above, run in the other trees): $(subst \.,.,$(subst |,$(comma) ,$(patsubst ^(%)$$,%,$(TSAN_SKIP))))"

# A short libFuzzer run over the worker's message decoding (clang, ASan+UBSan).
# For a long run: build/fuzz/tests/rpc/weft_fuzz_rpc -max_total_time=3600 build/fuzz/corpus
FUZZ_SECONDS ?= 20
test-fuzz: deps build/fuzz/build.ninja
	@cmake --build build/fuzz -j $(JOBS) --target weft_fuzz_rpc
	@rm -rf build/fuzz/corpus && mkdir -p build/fuzz/corpus && cp tests/rpc/fuzz_corpus/* build/fuzz/corpus/
	@build/fuzz/tests/rpc/weft_fuzz_rpc -max_total_time=$(FUZZ_SECONDS) -timeout=10 -artifact_prefix=build/fuzz/ \
	  -print_final_stats=1 build/fuzz/corpus \
	  >build/fuzz/fuzz.log 2>&1 || (tail -60 build/fuzz/fuzz.log; exit 1)
	@grep -E "stat::number_of_executed_units" build/fuzz/fuzz.log | sed 's/^/fuzz smoke: /'

# The main job on a built-in default: a ~100M-parameter model split over this
# CPU and two local workers, checked token for token against this CPU alone.
demo: deps-build build/release/build.ninja
	@cmake --build build/release -j $(JOBS) --target weft
	@build/release/tools/weft/weft demo

bench: build
	@build/release/tools/weft/weft bench ops

# The Debian package (docs/install.md): build/package/weft_VERSION_ARCH.deb with
# the tool, the weft-worker service, headers, libraries, CMake and pkg-config files.
package: deps build/package/build.ninja
	@cmake --build build/package -j $(JOBS) --target weft_installables
	@cd build/package && cpack -G DEB

# The package checked (tests/install/package_test.sh): its control fields,
# files and conffile, its maintainer scripts, and its service unit through
# `systemd-analyze verify` and a worker started as the unit starts it. Not in
# `make test`: the package's tree is a build of its own (minutes).
test-package: package
	@tests/install/package_test.sh "$$(ls -t build/package/weft_*.deb | head -n 1)" $(CURDIR)

clean:
	@rm -rf build

#!/usr/bin/env bash
# The installed tree end to end: `cmake --install` into a temporary prefix,
# then examples/ built against it as a project of its own (find_package(weft))
# and generate.cpp built again by hand from `pkg-config --cflags --libs weft`.
# Both programs, on this CPU alone and with an installed `weft worker`, must
# print exactly what the installed `weft run` prints (greedy); the installed
# `weft --version` names the version and the CPU kernels; nothing installed
# names the source or build tree.
# Usage: build_example.sh BUILD_DIR SOURCE_DIR VERSION WRITE_TEST_MODEL CMAKE GENERATOR CXX
set -euo pipefail
# shellcheck source=../lib/worker.sh
. "$(dirname "$0")/../lib/worker.sh"
build=$1
source=$2
version=$3
writer=$4
cmake=$5
generator=$6
cxx=$7
dir=$(mktemp -d)
worker_pid=
cleanup() {
  if [[ -n $worker_pid ]]; then kill "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; exit 1; }
prefix=$dir/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$dir/install.log" 2>&1 || { cat "$dir/install.log"; die "cmake --install"; }
echo "installed $(grep -c '^-- Installing' "$dir/install.log") files into the prefix"

# The layout docs/install.md promises.
weft=$prefix/bin/weft
pc=$(find "$prefix" -name weft.pc)
config=$(find "$prefix" -name weftConfig.cmake)
[[ -x $weft ]] || die "no bin/weft"
[[ -n $pc && -n $config ]] || die "no weft.pc ($pc) or weftConfig.cmake ($config)"
libdir=$(dirname "$(dirname "$pc")")
for f in include/weft/weft.h include/weft/version.h include/weft/runtime/session.h include/weft/backend/cpu.h; do
  [[ -f $prefix/$f ]] || die "no $f"
done
for lib in core cpu rpc_client rpc_server model runtime; do
  [[ -f $libdir/libweft_$lib.a ]] || die "no libweft_$lib.a in $libdir"
done
grep -q "#define WEFT_VERSION_STRING \"$version\"" "$prefix/include/weft/version.h" || die "version.h is not $version"
if find "$prefix" -name '*.in' | grep .; then die "templates installed"; fi
# The export and the .pc hold prefix-relative or prefix paths only: a path
# into the source or build tree would work here and break on any other machine.
if grep -rl -e "$source/" -e "$build/" "$prefix/include" "$libdir/cmake" "$libdir/pkgconfig"; then
  die "installed files name the source or build tree"
fi

version_line=$("$weft" --version)
echo "$version_line"
[[ $version_line =~ ^weft\ ${version//./\\.}\ \(commit\ ([0-9a-f]{7,}|unknown)\),\ CPU\ kernels:\ (avx2|avx512-vnni|avx512\ \(quantized:\ avx2\))$ ]] ||
  die "weft --version: '$version_line'"

# examples/ against the prefix, as a user would build it; the package found
# must be the one just installed.
"$cmake" -S "$source/examples" -B "$dir/examples" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; die "configuring examples/"; }
grep -q "^weft_DIR:PATH=$libdir/cmake/weft\$" "$dir/examples/CMakeCache.txt" ||
  die "find_package(weft) found $(grep '^weft_DIR' "$dir/examples/CMakeCache.txt"), not the prefix's"
"$cmake" --build "$dir/examples" >"$dir/build.log" 2>&1 || { cat "$dir/build.log"; die "building examples/"; }

# generate.cpp again, from pkg-config alone: every path it gives is the prefix's.
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs weft) || die "pkg-config --cflags --libs weft"
echo "pkg-config: $flags"
for f in $flags; do
  case $f in
    -I* | -L*) [[ ${f:2} == "$prefix"/* ]] || [[ ${f:2} == /usr/* ]] || die "pkg-config path outside the prefix: $f" ;;
  esac
done
[[ $flags == *"-I$prefix/include"* && $flags == *"-L$libdir"* ]] || die "pkg-config lacks the prefix's -I or -L"
# shellcheck disable=SC2086
"$cxx" -std=c++20 -O1 "$source/examples/generate.cpp" -o "$dir/generate_pc" $flags >"$dir/pc.log" 2>&1 ||
  { cat "$dir/pc.log"; die "building generate.cpp with pkg-config's flags"; }

"$writer" "$dir/model.gguf" --layers 3 --embd 64 --heads 4 --heads-kv 2 --ff 128 --vocab 600 --ctx 512 >/dev/null
prompt="The quick brown fox jumps over the lazy dog"
"$weft" run -m "$dir/model.gguf" -p "$prompt" -n 16 >"$dir/want.txt" 2>"$dir/run.err" ||
  { cat "$dir/run.err"; die "installed weft run"; }
[[ $(wc -c <"$dir/want.txt") -gt 1 ]] || die "weft run printed no text"

# A worker that requires a token, as the weft-worker service does.
od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$dir/worker.token"
start_weft_worker "$weft" "$dir/worker.log" --auth-token-file "$dir/worker.token" ||
  die "installed weft worker did not start"

check() {  # check NAME COMMAND...: its stdout must equal weft run's
  "${@:2}" >"$dir/got.txt" 2>"$dir/got.err" || { cat "$dir/got.err"; die "$1 failed"; }
  cmp -s "$dir/want.txt" "$dir/got.txt" ||
    die "$1 printed '$(cat -v "$dir/got.txt")', weft run '$(cat -v "$dir/want.txt")'"
  echo "$1: identical"
}
check "generate (find_package)" "$dir/examples/generate" "$dir/model.gguf" "$prompt" -n 16
check "generate (find_package) with a worker" "$dir/examples/generate" "$dir/model.gguf" "$prompt" -n 16 \
  --token-file "$dir/worker.token" "$endpoint"
check "generate (pkg-config) with a worker" "$dir/generate_pc" "$dir/model.gguf" "$prompt" -n 16 \
  --token-file "$dir/worker.token" "rpc://$endpoint"
# The worker is really asked: without the token the example is refused.
echo "not-the-token" >"$dir/wrong.token"
status=0
"$dir/examples/generate" "$dir/model.gguf" "$prompt" -n 16 --token-file "$dir/wrong.token" "$endpoint" \
  >/dev/null 2>"$dir/wrong.err" || status=$?
[[ $status -eq 1 ]] || { cat "$dir/wrong.err"; die "a wrong token: exit status $status (want 1)"; }
echo "wrong token refused: $(head -1 "$dir/wrong.err")"
echo "text: $(cat -v "$dir/want.txt")"
echo "PASS"

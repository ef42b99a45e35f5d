#!/usr/bin/env bash
# The weft-worker service as the Debian package installs it (docs/install.md),
# without installing anything: fills in packaging/weft-worker.service.in as
# cmake/WeftInstall.cmake does (the binary: this tree's weft; the
# configuration directory: a temporary one holding packaging/worker.conf and
# a token), then
#   1. `systemd-analyze verify` must accept the unit without a word: a
#      misspelt key or value is only a warning there (exit 0), so any output
#      fails the test;
#   2. the command line systemd runs (ExecStart with worker.conf's
#      WEFT_WORKER_ARGS split into words, the token as its credential) must
#      start a worker that takes the token: the address, the port and the
#      cache directory moved to loopback, a free port and a temporary
#      directory, nothing else changed;
#   3. the maintainer scripts, filled in the same way, must parse (sh -n).
# Exits 77 (SKIP) where systemd-analyze is not installed (Debian's systemd).
#
#   service_test.sh WEFT_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/../lib/shell_helpers.sh"
expect_args 2 "WEFT_BINARY SOURCE_DIR" "$@"
weft=$1
src=$2
dir=$(mktemp -d)
worker_pid=
cleanup() {
  [[ -n $worker_pid ]] && kill "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
command -v systemd-analyze >/dev/null || {
  echo "SKIP: systemd-analyze not found (Debian package systemd)"
  exit 77
}
[[ -x $weft ]] || fail "no weft binary at $weft"

# configure_file(@ONLY) of the two names the templates use.
fill() { sed -e "s|@WEFT_BINARY@|$weft|g" -e "s|@WEFT_CONF_DIR@|$dir/etc|g" "$1"; }
mkdir -p "$dir/etc"
cp "$src/packaging/worker.conf" "$dir/etc/worker.conf"
head -c 32 /dev/urandom | od -An -vtx1 | tr -d ' \n' >"$dir/etc/worker.token"
fill "$src/packaging/weft-worker.service.in" >"$dir/weft-worker.service"
grep -q '@[A-Z_]*@' "$dir/weft-worker.service" && fail "the unit names a variable the install does not set"

# 1. The unit as systemd reads it.
out=$(cd "$dir" && systemd-analyze verify ./weft-worker.service 2>&1) || fail "systemd-analyze verify: $out"
[[ -z $out ]] || fail "systemd-analyze verify warns: $out"

# 2. ExecStart as systemd expands it: ${CREDENTIALS_DIRECTORY}/token, and
# $WEFT_WORKER_ARGS unbraced (split at whitespace) from the environment file.
exec_start=$(sed -n 's/^ExecStart=//p' "$dir/weft-worker.service")
[[ $exec_start == "$weft worker --auth-token-file \${CREDENTIALS_DIRECTORY}/token \$WEFT_WORKER_ARGS" ]] ||
  fail "ExecStart changed; this test runs it as: weft worker --auth-token-file TOKEN \$WEFT_WORKER_ARGS ($exec_start)"
WEFT_WORKER_ARGS=$(sed -n 's/^WEFT_WORKER_ARGS="\(.*\)"$/\1/p' "$dir/etc/worker.conf")
[[ -n $WEFT_WORKER_ARGS ]] || fail "worker.conf sets no WEFT_WORKER_ARGS=\"...\""
read -ra args <<<"$WEFT_WORKER_ARGS"
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  case ${args[i]} in
    --host) args[i + 1]=127.0.0.1 ;;
    --port) args[i + 1]=0 ;;
    --cache-dir) args[i + 1]=$dir/cache ;;
  esac
done
"$weft" worker --auth-token-file "$dir/etc/worker.token" "${args[@]}" >"$dir/worker.log" 2>&1 &
worker_pid=$!
for _ in $(seq 300); do
  grep -q "listening on" "$dir/worker.log" && break
  kill -0 "$worker_pid" 2>/dev/null || fail "weft worker ${args[*]} exited: $(cat "$dir/worker.log")"
  sleep 0.05
done
grep -q "listening on" "$dir/worker.log" || fail "weft worker ${args[*]} did not listen in 15 s: $(cat "$dir/worker.log")"

# 3. The maintainer scripts.
for s in postinst prerm postrm; do
  fill "$src/packaging/debian/$s.in" >"$dir/$s"
  sh -n "$dir/$s" || fail "packaging/debian/$s.in does not parse"
done
echo "the weft-worker unit verifies, its command line starts a worker, the maintainer scripts parse"

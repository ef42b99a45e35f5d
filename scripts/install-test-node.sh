#!/usr/bin/env bash
# Installs the Node packages of weft serve's end-to-end tests (the official
# `openai`, `ollama` and `@anthropic-ai/sdk` clients, `puppeteer-core`) into
# DIR, outside the tracked tree; scripts/install-deps.sh (`make deps`) runs it
# for .cache/test-node, the directory the tests use:
#
#   scripts/install-test-node.sh DIR           # install (npm registry)
#   scripts/install-test-node.sh --check DIR   # the tests: verify, offline
#
# Install copies tests/serve/node/package.json and package-lock.json into DIR
# and runs `npm ci` there when DIR/node_modules is missing or either file
# differs from the copy. Idempotent: when DIR is up to date it prints nothing
# and changes nothing. --check never runs npm and never touches the network:
# it exits 1, naming what is missing or stale and the command that installs
# it, unless DIR holds exactly what the committed lock file pins. Tests run
# their .mjs files from DIR so imports resolve. Concurrent calls for the same
# DIR wait for each other (flock).
set -euo pipefail

check=false
if [[ ${1:-} == --check ]]; then
  check=true
  shift
fi
if (($# != 1)); then
  echo "usage: $0 [--check] DIR" >&2
  exit 2
fi
dir=$1
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tests/serve/node"

# Whether DIR holds node_modules installed from the committed lock file. A
# failed install removes DIR's lock copy, so it never looks up to date.
up_to_date() {
  [[ -d $dir/node_modules ]] && cmp -s "$src/package.json" "$dir/package.json" &&
    cmp -s "$src/package-lock.json" "$dir/package-lock.json"
}

if $check; then
  if up_to_date; then exit 0; fi
  what="no Node packages in $dir/node_modules"
  [[ -d $dir/node_modules ]] && what="the Node packages in $dir differ from tests/serve/node/package-lock.json"
  echo "$0: $what; install them with scripts/install-deps.sh (make deps)," \
    "or scripts/install-test-node.sh $dir (needs the npm registry once)" >&2
  exit 1
fi

command -v npm >/dev/null || { echo "$0: npm not found (install Node.js 18 or newer)" >&2; exit 1; }
mkdir -p "$dir"

install() {
  up_to_date && return 0
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  if ! (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null); then
    rm -rf "$dir/node_modules" "$dir/package-lock.json"
    echo "$0: npm ci failed in $dir" >&2
    return 1
  fi
}

if command -v flock >/dev/null; then
  exec 9>"$dir/.install.lock"
  flock 9
fi
install

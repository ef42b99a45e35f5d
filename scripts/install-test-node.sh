#!/usr/bin/env bash
# Installs the Node packages of weft serve's end-to-end tests (the official
# `openai`, `ollama` and `@anthropic-ai/sdk` clients, `puppeteer-core`) into
# DIR, outside the source tree:
#
#   scripts/install-test-node.sh DIR
#
# Copies tests/serve/node/package.json and package-lock.json into DIR and runs
# `npm ci` there when DIR/node_modules is missing or either file differs from
# the copy. Idempotent: when DIR is up to date it prints nothing and changes
# nothing. Tests then run their .mjs files from DIR so imports resolve.
# Concurrent calls for the same DIR wait for each other (flock).
set -euo pipefail

if (($# != 1)); then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir=$1
src="$(cd "$(dirname "$0")/.." && pwd)/tests/serve/node"

command -v npm >/dev/null || { echo "$0: npm not found (install Node.js 18 or newer)" >&2; exit 1; }
mkdir -p "$dir"

install() {
  if [[ -d $dir/node_modules ]] && cmp -s "$src/package.json" "$dir/package.json" &&
    cmp -s "$src/package-lock.json" "$dir/package-lock.json"; then
    return 0
  fi
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  # A failed install must not look up to date next time.
  if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
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

#!/usr/bin/env bash
# Installs the Debian packages weft needs to build and test and, for the
# tests, the Node packages of weft serve's end-to-end tests (into
# .cache/test-node, from tests/serve/node/package-lock.json), so that `make
# test` runs offline afterwards. Idempotent: when everything is present it
# prints nothing and changes nothing.
#
#   scripts/install-deps.sh          # building, testing and packaging (make test)
#   scripts/install-deps.sh build    # building alone (make demo): no browser,
#                                    # clang, Node or numpy to download
set -euo pipefail

# What configuring and building the Release tree needs (CMake looks for
# GoogleTest and python3 even when no test runs).
packages=(
  build-essential cmake ninja-build ccache pkg-config
  libgtest-dev libgmock-dev
  libcli11-dev libxxhash-dev libssl-dev
  libcpp-httplib-dev nlohmann-json3-dev  # weft serve
  python3
)
want_tests=true
case "${1:-all}" in
  build) want_tests=false ;;
  all) ;;
  *) echo "install-deps: unknown set '$1' (build or all)" >&2; exit 2 ;;
esac
if $want_tests; then
  packages+=(
    dpkg-dev file  # make package: CPack DEB runs dpkg-shlibdeps and file
    systemd  # tests/install/service_test.sh: systemd-analyze verify of the worker unit
    chromium  # tests/serve: headless Chromium loads the chat page
    clang libclang-rt-14-dev  # the fuzz tree
    python3-numpy  # tests: the float64 model-family references (tests/model/families)
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# tests/serve run the openai npm client: Debian's nodejs and npm unless a
# node with npm is already installed (e.g. NodeSource's, which bundles npm
# and conflicts with Debian's npm package).
if $want_tests && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then missing+=(nodejs npm); fi
if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Node packages tests/serve import, where tests/CMakeLists.txt points the
# tests (WEFT_TEST_NODE_DIR): the tests only check them (--check), offline.
if $want_tests; then
  root=$(cd "$(dirname "$0")/.." && pwd)
  "$root/scripts/install-test-node.sh" "${WEFT_TEST_NODE_DIR:-$root/.cache/test-node}"
fi

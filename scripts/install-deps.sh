#!/usr/bin/env bash
# Installs the Debian packages weft needs to build and test. Idempotent: when
# everything is present it prints nothing and changes nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  dpkg-dev file  # make package: CPack DEB runs dpkg-shlibdeps and file
  libgtest-dev libgmock-dev
  libcli11-dev libxxhash-dev libssl-dev
  libcpp-httplib-dev nlohmann-json3-dev  # weft serve
  chromium  # tests/serve: headless Chromium loads the chat page
  clang libclang-rt-14-dev
  python3 python3-numpy  # tests: the float64 model-family references (tests/model/families)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# tests/serve run the openai npm client: Debian's nodejs and npm unless a
# node with npm is already installed (e.g. NodeSource's, which bundles npm
# and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
((${#missing[@]} == 0)) && exit 0

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

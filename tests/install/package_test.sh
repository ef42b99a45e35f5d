#!/usr/bin/env bash
# The Debian package `make package` built (docs/install.md), checked without
# installing it (`make test-package` builds it and runs this; minutes: a tree
# of its own, so not part of `make test`):
#   - its control fields: name, version, architecture, Depends from
#     dpkg-shlibdeps (libc6, libstdc++6, libssl3, libxxhash0);
#   - the files docs/install.md lists, worker.conf as a conffile, and the
#     maintainer scripts (executable, parsing);
#   - the unpacked tree's weft runs, and its service unit, filled with the
#     unpacked paths, passes tests/install/service_test.sh's checks
#     (`systemd-analyze verify`, its command line starting a worker).
#
#   package_test.sh DEB SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/../lib/shell_helpers.sh"
expect_args 2 "DEB SOURCE_DIR" "$@"
deb=$1
src=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
[[ -f $deb ]] || fail "no package at $deb (make package)"

field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == weft ]] || fail "Package: $(field Package)"
version=$(sed -n 's/^project(weft VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ -n $version && $(field Version) == "$version" ]] || fail "Version: $(field Version), CMakeLists.txt says $version"
[[ $(field Architecture) == "$(dpkg --print-architecture)" ]] || fail "Architecture: $(field Architecture)"
depends=$(field Depends)
for lib in libc6 libstdc++6 libssl3 libxxhash0; do
  [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib: $depends"
done

files=$(dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|')
for f in /usr/bin/weft /usr/lib/systemd/system/weft-worker.service /etc/weft/worker.conf \
  /usr/include/weft/weft.h /usr/share/doc/weft/install.md; do
  grep -qx -- "$f" <<<"$files" || fail "the package has no $f"
done
grep -q 'lib/.*/cmake/weft/' <<<"$files" || fail "the package has no CMake package (lib/*/cmake/weft)"
grep -q 'lib/.*/pkgconfig/weft.pc' <<<"$files" || fail "the package has no pkg-config file"

dpkg-deb -e "$deb" "$dir/control"
grep -qx /etc/weft/worker.conf "$dir/control/conffiles" || fail "worker.conf is not a conffile"
for s in postinst prerm postrm; do
  [[ -x $dir/control/$s ]] || fail "no executable $s"
  sh -n "$dir/control/$s" || fail "$s does not parse"
done

dpkg-deb -x "$deb" "$dir/root"
"$dir/root/usr/bin/weft" --version >/dev/null || fail "the packaged weft does not run"
# The packaged unit names /usr/bin/weft and /etc/weft: pointed at the
# unpacked tree, it is the template service_test.sh fills in.
sed -e "s|/usr/bin/weft|@WEFT_BINARY@|g" -e "s|/etc/weft|@WEFT_CONF_DIR@|g" \
  "$dir/root/usr/lib/systemd/system/weft-worker.service" >"$dir/unit.in"
mkdir -p "$dir/src/packaging/debian"
cp "$dir/unit.in" "$dir/src/packaging/weft-worker.service.in"
cp "$dir/root/etc/weft/worker.conf" "$dir/src/packaging/worker.conf"
for s in postinst prerm postrm; do cp "$dir/control/$s" "$dir/src/packaging/debian/$s.in"; done
"$(dirname "$0")/service_test.sh" "$dir/root/usr/bin/weft" "$dir/src" || fail "the packaged service (above)"
echo "the package holds what docs/install.md lists, its scripts parse, its unit verifies and starts a worker"

#!/bin/sh
# Installed headers are promises to users (STYLE.md rule 20): no test hooks,
# no references to files a user does not have. Checks every header under
# include/weft/ (what `cmake --install` copies) for:
#   - the names of test hooks, which belong in internal headers (src/...);
#   - FACTS.md or ../shared/, files outside the repository.
# Usage: installed_headers_test.sh SOURCE_DIR
set -u
src=${1:?usage: installed_headers_test.sh SOURCE_DIR}
headers=$(find "$src/include/weft" -name '*.h')
[ -n "$headers" ] || { echo "no headers under $src/include/weft" >&2; exit 1; }

# Hooks already moved out, and references outside the tree: any hit fails.
forbidden='rpc_open_connections|FACTS\.md|\.\./shared/'
# Hooks still installed (docs/architecture.md, "Installed"): moving each is
# open work; when one moves, its name goes to `forbidden` above.
pending='refuse_ops|unsafe_skip_hazard_waits|set_reuse_graphs|void serve\(Stream&'

status=0
# shellcheck disable=SC2086
if hits=$(grep -nE "$forbidden" $headers); then
  echo "installed headers name test hooks or files outside the repository:" >&2
  echo "$hits" >&2
  status=1
fi
# shellcheck disable=SC2086
grep -nE "$pending" $headers | sed 's/^/still installed (pending): /' >&2
exit $status

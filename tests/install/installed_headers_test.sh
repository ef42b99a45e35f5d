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

# Test hooks (now in internal headers: src/sched/scheduler_testing.h,
# src/rpc/server/worker_testing.h, src/rpc/client/connection.h,
# src/model/llama_model_testing.h; the installed classes name only their
# *TestAccess friend), an uninstalled type, and files outside the
# repository: any hit fails.
forbidden='rpc_open_connections|refuse_ops|unsafe_skip_hazard_waits|set_reuse_graphs|serve\(Stream|class Stream|FACTS\.md|\.\./shared/'

status=0
# shellcheck disable=SC2086
if hits=$(grep -nE "$forbidden" $headers); then
  echo "installed headers name test hooks or files outside the repository:" >&2
  echo "$hits" >&2
  status=1
fi
exit $status

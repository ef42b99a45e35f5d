# Sourced by the shell tests for the opening they share:
#
#   set -euo pipefail
#   source "$(dirname "$0")/../lib/shell_helpers.sh"
#   expect_args 2 "WEFT_BINARY SOURCE_DIR" "$@"
#
# expect_args COUNT USAGE ARGS...: unless ARGS are COUNT words, prints
# "usage: SCRIPT USAGE" on stderr and exits 2.
expect_args() {
  local count=$1 usage=$2
  shift 2
  if (($# != count)); then
    echo "usage: $0 $usage" >&2
    exit 2
  fi
}

# fail MESSAGE...: prints "FAIL: MESSAGE", then runs the script's on_fail
# function where it defines one (to show its logs), and exits 1.
fail() {
  echo "FAIL: $*"
  if declare -F on_fail >/dev/null; then on_fail; fi
  exit 1
}

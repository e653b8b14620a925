#!/usr/bin/env bash
# Runs `go test` with the given arguments, as make test does, and when it
# fails prints what failed once more at the very end: a timed-out test
# binary dumps every goroutine, thousands of lines that push the name of
# the test that hung out of any log's tail.
set -uo pipefail
log=$(mktemp "${TMPDIR:-/tmp}/quorate-test.XXXXXX")
trap 'rm -f "$log"' EXIT
"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo
  echo "=== what failed (go test $*: exit $rc)"
  # Failed tests and packages, panics, and the tests a timeout found running.
  grep -E -- '^\s*--- FAIL|^FAIL|^panic:|Error Trace:|Error:' "$log" | head -60
  awk '/^panic: test timed out/ {p=1} p && /^goroutine / {exit} p' "$log" | head -40
fi
exit "$rc"

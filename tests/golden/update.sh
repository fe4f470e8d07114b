#!/usr/bin/env bash
# tests/golden/update.sh BUILD — writes tests/golden/expected/ from BUILD's
# heaptrail.  Only for a change of output that is meant: read the diff of
# expected/ (git diff tests/golden/expected) before committing it.
set -euo pipefail
exec python3 "$(dirname "${BASH_SOURCE[0]}")/golden.py" --update "${1:?usage: tests/golden/update.sh BUILD}"

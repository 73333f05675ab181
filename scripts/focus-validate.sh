#!/usr/bin/env bash
# Validates a CSV against FinOps FOCUS 1.0 with the FinOps Foundation's
# focus-validator (installed by scripts/lib.sh ensure_focus_validator).
# Usage: focus-validate.sh FILE.csv. Exits 0 only when the validator says
# "Validation succeeded." (it exits 0 on failures too).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${FOCUS_VALIDATOR_VENV:?run through make test, or set FOCUS_VALIDATOR_VENV}"
file="$(realpath "$1")"
# The validator reads its currency list from a path relative to its package.
site="$(ls -d "$venv"/lib/python3*/site-packages | head -1)"
out="$(cd "$site" && "$venv/bin/focus-validator" --data-file "$file" --validate-version 1.0 \
  --override-file "$here/focus-overrides.yaml" 2>&1)"
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] && grep -qx 'Validation succeeded.' <<<"$out"

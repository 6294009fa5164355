#!/usr/bin/env bash
# Import circles between the top-level modules of each crate (../shared/tools/module-cycles.py).
# The circles that exist today are listed in .ci/module-circles.known, one line each as the tool
# prints it; the list only shrinks. A circle not on it (a new one, or a known one that grew)
# fails, and so does a listed circle that is gone, so that the list is kept exact.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=../shared/tools/module-cycles.py
[ -f "$tool" ] || { echo "module_circles.sh: $tool is missing (../shared must be beside the checkout)" >&2; exit 1; }
found="$(python3 "$tool" . | grep ': circle of ' | sort || true)"
known="$(grep -v '^#' .ci/module-circles.known | grep -v '^$' | sort || true)"
new="$(comm -23 <(printf '%s\n' "$found") <(printf '%s\n' "$known") | grep -v '^$' || true)"
gone="$(comm -13 <(printf '%s\n' "$found") <(printf '%s\n' "$known") | grep -v '^$' || true)"
status=0
if [ -n "$new" ]; then
    echo "module_circles.sh: import circles not in .ci/module-circles.known (break them):" >&2
    printf '  %s\n' "$new" >&2
    status=1
fi
if [ -n "$gone" ]; then
    echo "module_circles.sh: circles listed in .ci/module-circles.known that no longer exist (remove the lines):" >&2
    printf '  %s\n' "$gone" >&2
    status=1
fi
[ "$status" = 0 ] && echo "module_circles.sh: $(printf '%s\n' "$found" | grep -c 'circle of' || true) known circles, none new"
exit "$status"

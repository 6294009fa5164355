#!/usr/bin/env bash
# Builds the book (docs/, mdBook) and checks every link between its chapters and from README.md
# into it (run by .ci/run; by hand: `bash .ci/book.sh`, the pages go to target/book/).
#
# - Installs mdbook (pinned, --locked) unless that version is already on PATH.
# - .ci/check_links.py first, on the markdown: every relative link names a chapter or file of
#   docs/src (README.md: a file of the repository), and every #anchor a heading of its target,
#   by mdBook's rule for heading ids. It names each broken link and fails.
# - Then `mdbook build docs` (a chapter SUMMARY.md lists but missing, or an {{#include}} that
#   does not resolve, fails the build), and the anchors again against the ids of the pages
#   mdBook wrote.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.4.52

if ! mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION$"; then
    echo "book: installing mdbook $MDBOOK_VERSION (several minutes on 2 cores)"
    timeout 1800 cargo install --locked --quiet --version "$MDBOOK_VERSION" mdbook
fi

python3 .ci/check_links.py
rm -rf target/book
mdbook build docs
python3 .ci/check_links.py --html target/book

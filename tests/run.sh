#!/usr/bin/env bash
# Kiln's test command: lit/FileCheck tests, then pytest (numerics). Run from the repository
# root with Kiln installed (pip install ".[test]").
set -euo pipefail
cd "$(dirname "$0")/.."
# A compile cache of this run's own: nothing stale from an earlier build, nothing left in ~/.cache.
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$(mktemp -d -t kiln-test-cache.XXXXXX)}"
lit -q tests/lit
python -m pytest -q -n 2 --durations=25 tests/py

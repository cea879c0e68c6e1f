#!/usr/bin/env bash
# Kiln's test command: lit/FileCheck tests, then pytest (numerics). Run from the repository
# root with Kiln installed (pip install ".[test]").
set -euo pipefail
cd "$(dirname "$0")/.."
lit -q tests/lit
python -m pytest -q -n 2 tests/py

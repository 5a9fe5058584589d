#!/usr/bin/env bash
# scripts/test.sh -- the README's test command: set up (scripts/setup.sh), then run the whole test suite.
# Exits non-zero when any test fails. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir "${RAZOR_BUILD_DIR:-build}" --output-on-failure

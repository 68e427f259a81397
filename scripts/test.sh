#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, and end-to-end tests with real processes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# A persistent target directory outside the clone keeps builds incremental across clones.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/sluice-target}"

scripts/install-deps.sh test
cargo fmt --all --check
scripts/check-layers.sh
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace --bins

results=$(mktemp)
trap 'rm -f "$results"' EXIT
# Libraries and unit tests first; then the end-to-end suites, two at a time (each starts a
# cluster of several processes on this 2-core machine).
cargo test --workspace --exclude sluice-integration 2>&1 | tee -a "$results"
cargo test -p sluice-integration --tests -- --test-threads=2 2>&1 | tee -a "$results"

# One closing line over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "sluice: %d passed, %d failed\n", p, f }' "$results"

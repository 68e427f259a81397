#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, and end-to-end tests with real processes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# A persistent target directory outside the clone keeps builds incremental across clones.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/sluice-target}"

scripts/install-deps.sh test
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace --bins
# Libraries and unit tests first; then the end-to-end suites, two at a time (each starts a
# cluster of several processes on this 2-core machine).
cargo test --workspace --exclude sluice-integration
cargo test -p sluice-integration -- --test-threads=2

#!/usr/bin/env bash
# Builds sluice and runs the bundled WordCount on an embedded cluster (JobManager and
# TaskManager in this one process). Extra arguments go to `sluice run`, e.g. `-p 4`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/sluice-target}"
scripts/install-deps.sh build
cargo build --bin sluice
exec "$CARGO_TARGET_DIR/debug/sluice" run -t local "$@" wordcount

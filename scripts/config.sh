#!/usr/bin/env bash
# Shared settings of the standalone scripts. Sourced, not run.
#   SLUICE_CONF_DIR  configuration directory (default: <sluice home>/conf)
#   SLUICE_LOG_DIR   log and pid files (default: <sluice home>/log)
#   SLUICE_BIN       the sluice binary (default: bin/sluice, then the cargo build output, then PATH)

SLUICE_HOME="${SLUICE_HOME:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
SLUICE_CONF_DIR="${SLUICE_CONF_DIR:-$SLUICE_HOME/conf}"
SLUICE_LOG_DIR="${SLUICE_LOG_DIR:-$SLUICE_HOME/log}"
export SLUICE_HOME SLUICE_CONF_DIR SLUICE_LOG_DIR

find_sluice_bin() {
  if [ -n "${SLUICE_BIN:-}" ]; then echo "$SLUICE_BIN"; return; fi
  local candidates=("$SLUICE_HOME/bin/sluice")
  [ -n "${CARGO_TARGET_DIR:-}" ] && candidates+=("$CARGO_TARGET_DIR/debug/sluice")
  candidates+=("$SLUICE_HOME/target/debug/sluice")
  for c in "${candidates[@]}"; do
    if [ -x "$c" ]; then echo "$c"; return; fi
  done
  if command -v sluice >/dev/null 2>&1; then command -v sluice; return; fi
  echo "error: no sluice binary found; build it with 'cargo build --bin sluice' or set SLUICE_BIN" >&2
  return 1
}

# The standalone cluster's shared secret: generated once per configuration directory unless
# one is configured (security.cluster.secret[-file] or SLUICE_CLUSTER_SECRET).
ensure_cluster_secret() {
  local file="$SLUICE_CONF_DIR/.cluster-secret"
  if [ -n "${SLUICE_CLUSTER_SECRET:-}" ] || [ -f "$file" ]; then return; fi
  if grep -Eq '^[[:space:]]*security\.cluster\.secret(-file)?[[:space:]]*:[[:space:]]*[^[:space:]#]' "$SLUICE_CONF_DIR/config.yaml" 2>/dev/null; then return; fi
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$file")
  echo "Generated the cluster secret $file (copy it to every host of the cluster)."
}

is_local_host() {
  case "$1" in
    localhost|127.*|::1|"$(hostname)"|"$(hostname -f 2>/dev/null)") return 0 ;;
    *) return 1 ;;
  esac
}

# Lines of a hosts file without comments and blank lines.
read_hosts() {
  [ -f "$1" ] || return 0
  sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$1"
}

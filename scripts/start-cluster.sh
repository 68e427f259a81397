#!/usr/bin/env bash
# Starts a standalone cluster: a JobManager per line of conf/masters (host:webui-port) and one
# TaskManager per line of conf/workers. Several masters need ZooKeeper HA
# (high-availability.type: zookeeper): they elect a leader, and each gets its line's REST port
# and a free RPC port, which the leader publishes in ZooKeeper. Local hosts are started
# directly, others over ssh (sluice must be installed at the same path there).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/config.sh"
ensure_cluster_secret

remote() { # host command...
  local host=$1; shift
  ssh -n "$host" "cd '$SLUICE_HOME' && SLUICE_CONF_DIR='$SLUICE_CONF_DIR' SLUICE_LOG_DIR='$SLUICE_LOG_DIR' $*"
}

masters=$(read_hosts "$SLUICE_CONF_DIR/masters")
[ -n "$masters" ] || masters=localhost
count=$(echo "$masters" | wc -l)
if [ "$count" -gt 1 ] && ! grep -Eq '^[[:space:]]*high-availability\.type:[[:space:]]*"?zookeeper' "$SLUICE_CONF_DIR/config.yaml"; then
  echo "conf/masters lists $count JobManagers, but high-availability.type is not zookeeper: starting only the first." >&2
  masters=$(echo "$masters" | head -n 1)
  count=1
fi
echo "Starting cluster."
while read -r line; do
  host=$(echo "$line" | cut -d: -f1)
  port=$(echo "$line" | cut -s -d: -f2)
  args=()
  if [ "$count" -gt 1 ]; then
    args=(-D jobmanager.rpc.port=0)
    [ -n "$port" ] && args+=(-D "rest.port=$port")
  fi
  if is_local_host "$host"; then
    "$SLUICE_HOME/scripts/jobmanager.sh" start "${args[@]}"
  else
    remote "$host" scripts/jobmanager.sh start "${args[@]}"
  fi
done <<< "$masters"

workers=$(read_hosts "$SLUICE_CONF_DIR/workers")
[ -n "$workers" ] || workers=localhost
while read -r worker; do
  if is_local_host "$worker"; then
    "$SLUICE_HOME/scripts/taskmanager.sh" start
  else
    remote "$worker" scripts/taskmanager.sh start
  fi
done <<< "$workers"

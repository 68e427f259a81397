#!/usr/bin/env bash
# Starts a standalone cluster: a JobManager on the first host of conf/masters and one
# TaskManager per line of conf/workers. Local hosts are started directly, others over ssh
# (sluice must be installed at the same path there).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/config.sh"
ensure_cluster_secret

remote() { # host command...
  local host=$1; shift
  ssh -n "$host" "cd '$SLUICE_HOME' && SLUICE_CONF_DIR='$SLUICE_CONF_DIR' SLUICE_LOG_DIR='$SLUICE_LOG_DIR' $*"
}

masters=$(read_hosts "$SLUICE_CONF_DIR/masters")
[ -n "$masters" ] || masters=localhost
master=$(echo "$masters" | head -n 1 | cut -d: -f1)
echo "Starting cluster."
if is_local_host "$master"; then
  "$SLUICE_HOME/scripts/jobmanager.sh" start
else
  remote "$master" scripts/jobmanager.sh start
fi

workers=$(read_hosts "$SLUICE_CONF_DIR/workers")
[ -n "$workers" ] || workers=localhost
while read -r worker; do
  if is_local_host "$worker"; then
    "$SLUICE_HOME/scripts/taskmanager.sh" start
  else
    remote "$worker" scripts/taskmanager.sh start
  fi
done <<< "$workers"

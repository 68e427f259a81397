#!/usr/bin/env bash
# Stops the TaskManagers of conf/workers and the JobManager of conf/masters.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/config.sh"

remote() {
  local host=$1; shift
  ssh -n "$host" "cd '$SLUICE_HOME' && SLUICE_CONF_DIR='$SLUICE_CONF_DIR' SLUICE_LOG_DIR='$SLUICE_LOG_DIR' $*"
}

workers=$(read_hosts "$SLUICE_CONF_DIR/workers")
[ -n "$workers" ] || workers=localhost
stopped_local=no
while read -r worker; do
  if is_local_host "$worker"; then
    if [ "$stopped_local" = no ]; then "$SLUICE_HOME/scripts/taskmanager.sh" stop-all; stopped_local=yes; fi
  else
    remote "$worker" scripts/taskmanager.sh stop-all
  fi
done <<< "$workers"

masters=$(read_hosts "$SLUICE_CONF_DIR/masters")
[ -n "$masters" ] || masters=localhost
while read -r master; do
  host=${master%%:*}
  if is_local_host "$host"; then
    "$SLUICE_HOME/scripts/jobmanager.sh" stop-all
  else
    remote "$host" scripts/jobmanager.sh stop-all
  fi
done <<< "$masters"

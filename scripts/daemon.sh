#!/usr/bin/env bash
# Starts or stops one kind of sluice process on this host.
# usage: daemon.sh (jobmanager|taskmanager) (start|start-foreground|stop|stop-all) [sluice args...]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/config.sh"

kind="${1:?usage: daemon.sh (jobmanager|taskmanager) (start|start-foreground|stop|stop-all) [args]}"
action="${2:?usage: daemon.sh $kind (start|start-foreground|stop|stop-all) [args]}"
shift 2
case "$kind" in jobmanager|taskmanager) ;; *) echo "unknown process kind '$kind'" >&2; exit 2 ;; esac

mkdir -p "$SLUICE_LOG_DIR"
pid_file="$SLUICE_LOG_DIR/sluice-${USER:-$(id -un)}-$kind.pid"

# Whether pid runs sluice as this kind of daemon. A pid file outlives its process, and the
# pid may since belong to another program: that one must never be signalled. Without /proc
# (not Linux) only liveness can be checked.
is_ours() {
  local pid=$1 args
  kill -0 "$pid" 2>/dev/null || return 1
  [ -d /proc ] || return 0
  args=$(tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $(head -n 1 <<<"$args") == *sluice* ]] && grep -qx -- "$kind" <<<"$args"
}

live_pids() {
  [ -f "$pid_file" ] || return 0
  local p
  while read -r p; do
    if [[ $p =~ ^[0-9]+$ ]] && is_ours "$p"; then echo "$p"; fi
  done < "$pid_file"
  return 0
}

stop_pid() {
  local pid=$1
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "$kind $pid did not stop within 5 s; killing it"
  kill -9 "$pid" 2>/dev/null || true
}

case "$action" in
  start|start-foreground)
    ensure_cluster_secret
    bin=$(find_sluice_bin)
    if [ "$action" = start-foreground ]; then
      exec "$bin" --config-dir "$SLUICE_CONF_DIR" "$kind" "$@"
    fi
    index=$(live_pids | wc -l)
    log="$SLUICE_LOG_DIR/sluice-${USER:-$(id -un)}-$kind-$index-$(hostname).log"
    nohup "$bin" --config-dir "$SLUICE_CONF_DIR" "$kind" "$@" >> "$log" 2>&1 < /dev/null &
    pid=$!
    live_pids > "$pid_file.tmp" || true
    echo "$pid" >> "$pid_file.tmp"
    mv "$pid_file.tmp" "$pid_file"
    echo "Starting $kind daemon (pid $pid) on host $(hostname), log $log."
    ;;
  stop)
    pid=$(live_pids | tail -n 1)
    if [ -z "$pid" ]; then
      # Only stale entries (dead or reused pids) are left: the file means nothing any more.
      rm -f "$pid_file"
      echo "No $kind daemon (pid file $pid_file) is running."
      exit 0
    fi
    echo "Stopping $kind daemon (pid $pid) on host $(hostname)."
    stop_pid "$pid"
    live_pids > "$pid_file.tmp" || true
    mv "$pid_file.tmp" "$pid_file"
    ;;
  stop-all)
    for pid in $(live_pids); do
      echo "Stopping $kind daemon (pid $pid) on host $(hostname)."
      stop_pid "$pid"
    done
    rm -f "$pid_file"
    ;;
  *) echo "unknown action '$action': use start, start-foreground, stop or stop-all" >&2; exit 2 ;;
esac

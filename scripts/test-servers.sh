#!/usr/bin/env bash
# Shared helpers of the scripts that run servers for the tests (kafka.sh, kubernetes.sh,
# yarn-minicluster.sh). Sourced, not run.

# A TCP port on loopback that was free a moment ago.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Stops the process whose pid PIDFILE holds: SIGTERM, then SIGKILL after SECONDS (default 10);
# removes PIDFILE. Nothing to do without PIDFILE.
stop_pid_file() {
  local pidfile="$1" seconds="${2:-10}"
  [[ -f "$pidfile" ]] || return 0
  local pid
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((seconds * 10))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# Prints READY_FILE when the process in PIDFILE runs and has written it; otherwise says MESSAGE
# and exits 1 (the `status DIR` of the scripts).
print_ready_or_fail() {
  local pidfile="$1" ready="$2" message="$3"
  if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && [[ -s "$ready" ]]; then
    cat "$ready"
  else
    echo "$message" >&2
    exit 1
  fi
}

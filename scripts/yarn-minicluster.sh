#!/usr/bin/env bash
# A real YARN (MiniYARNCluster: 1 ResourceManager + 2 NodeManagers on loopback) and a real HDFS
# (MiniDFSCluster: 1 NameNode + 3 DataNodes on 127.0.0.1) for tests, from the same launcher.
#   scripts/yarn-minicluster.sh build        build the launcher (Maven; idempotent)
#   scripts/yarn-minicluster.sh start DIR    start YARN; DIR gets yarn-site.xml, ready, pid, log
#   scripts/yarn-minicluster.sh start-dfs DIR [PID]
#                                            start HDFS; DIR gets core-site.xml, hdfs-site.xml,
#                                            ready, pid, log; with PID it stops when PID ends;
#                                            DIR/control takes commands that stop and restart
#                                            the NameNode or stop a DataNode (DfsLauncher.java)
#   scripts/yarn-minicluster.sh stop DIR     stop the cluster started in DIR
# Starting where a cluster already runs prints its line again. `start` prints the launcher's
# line READY rm=HOST:PORT scheduler=HOST:PORT web=HOST:PORT; `start-dfs` prints
# READY namenode=HOST:PORT nameservice=NAME.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAUNCHER="$ROOT/integration/yarn-launcher"
JAR="$LAUNCHER/target/yarn-launcher-0.1.0.jar"
START_TIMEOUT_S="${YARN_MINICLUSTER_START_TIMEOUT_S:-180}"
# shellcheck source=scripts/test-servers.sh
. "$ROOT/scripts/test-servers.sh"

# JDK 17 closes these packages; Hadoop's reflection (and Guice in the RM web app) needs them.
JAVA_OPENS=(
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
  --add-opens java.base/java.util.concurrent=ALL-UNNAMED
  --add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.net=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/sun.net.dns=ALL-UNNAMED
  --add-opens java.base/sun.net.util=ALL-UNNAMED
  --add-opens java.base/sun.security.util=ALL-UNNAMED
)

build() {
  local stamp="$LAUNCHER/target/.built"
  # Rebuild only when the pom or the sources changed since the last successful build.
  if [[ -f "$stamp" && -f "$JAR" ]] &&
    [[ -z "$(find "$LAUNCHER/pom.xml" "$LAUNCHER/src" -newer "$stamp" -print -quit)" ]]; then
    return 0
  fi
  command -v mvn >/dev/null || { echo "mvn not found: apt-get install -y maven openjdk-17-jdk-headless" >&2; exit 1; }
  (cd "$LAUNCHER" && mvn -q -B -DskipTests package) >&2
  touch "$stamp"
}

# start DIR MAIN_CLASS [ARG...]: starts the launcher's MAIN_CLASS with DIR as its first argument
# and waits for DIR/ready.
start() {
  local dir="${1:?usage: start DIR}" main="$2"
  shift 2
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  build
  if [[ -f "$dir/pid" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    cat "$dir/ready"
    return 0
  fi
  rm -f "$dir/ready" "$dir/yarn-site.xml" "$dir/core-site.xml" "$dir/hdfs-site.xml"
  # The mini clusters write their work dirs under ./target relative to the working directory.
  (cd "$dir" && exec setsid java -Xmx1g -Dorg.slf4j.simpleLogger.defaultLogLevel="${YARN_MINICLUSTER_LOG_LEVEL:-warn}" "${JAVA_OPENS[@]}" \
    -cp "$JAR:$LAUNCHER/target/lib/*" "$main" "$dir" "$@" \
    </dev/null >"$dir/log" 2>&1) &
  echo $! >"$dir/pid"
  local waited=0
  while [[ ! -s "$dir/ready" ]]; do
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "mini cluster exited before it was ready; last log lines:" >&2
      tail -n 40 "$dir/log" >&2
      exit 1
    fi
    if ((waited >= START_TIMEOUT_S * 10)); then
      echo "mini cluster not ready after ${START_TIMEOUT_S}s; see $dir/log" >&2
      stop "$dir"
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  cat "$dir/ready"
}

stop() {
  local dir="${1:?usage: stop DIR}"
  stop_pid_file "$dir/pid"
}

case "${1:-}" in
  build) build ;;
  start) start "${2:?usage: start DIR}" sluice.yarn.Launcher ;;
  start-dfs) start "${2:?usage: start-dfs DIR [PID]}" sluice.yarn.DfsLauncher ${3:+--watch-pid "$3"} ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 build | start DIR | start-dfs DIR [PID] | stop DIR" >&2; exit 2 ;;
esac

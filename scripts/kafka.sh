#!/usr/bin/env bash
# A real Apache Kafka broker (4.x, KRaft: one process that is broker and controller) for
# development and tests, from Maven Central's jars (scripts/kafka/pom.xml; no Kafka download).
#
#   scripts/kafka.sh install                   fetch the broker's jars with Maven (idempotent)
#   scripts/kafka.sh start DIR [PORT [PID]]    format DIR (first time) and start a broker on
#                                              127.0.0.1:PORT (default: a free port); with PID it
#                                              stops when that process ends
#   scripts/kafka.sh stop DIR                  stop the broker started in DIR
#   scripts/kafka.sh status DIR                print its READY line, exit 1 if it is not running
#
# `start` prints `READY bootstrap=127.0.0.1:PORT` once the broker accepts connections; starting
# where a broker already runs prints that line again. DIR holds server.properties, data/, log,
# pid and ready. Environment: KAFKA_START_TIMEOUT_S (default 120), KAFKA_HEAP (default 512m).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM_DIR="$ROOT/scripts/kafka"
LIB="$POM_DIR/target/lib"
START_TIMEOUT_S="${KAFKA_START_TIMEOUT_S:-120}"
# shellcheck source=scripts/test-servers.sh
. "$ROOT/scripts/test-servers.sh"

install() {
  local stamp="$POM_DIR/target/.installed"
  if [[ -f "$stamp" && -z "$(find "$POM_DIR/pom.xml" -newer "$stamp" -print -quit)" ]]; then
    return 0
  fi
  command -v mvn >/dev/null || { echo "kafka: mvn not found: apt-get install -y maven openjdk-17-jdk-headless" >&2; exit 1; }
  rm -rf "$LIB"
  (cd "$POM_DIR" && mvn -q -B -Dstyle.color=never package) >&2
  ls "$LIB"/kafka_2.13-*.jar >/dev/null
  touch "$stamp"
  echo "kafka: installed ($LIB)" >&2
}


running() {
  local dir="$1"
  [[ -f "$dir/pid" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null
}

# The JVM command line; the heap is small for a test broker.
JAVA=(java "-Xmx${KAFKA_HEAP:-512m}" -Xms64m -XX:+UseG1GC -Djava.awt.headless=true
  "-Dorg.slf4j.simpleLogger.defaultLogLevel=${KAFKA_LOG_LEVEL:-warn}"
  # `start` waits for this logger's "Kafka Server started".
  -Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info -cp "$LIB/*")

start() {
  local dir="${1:?usage: start DIR [PORT [PID]]}" port="${2:-}" watch="${3:-}"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  install
  if running "$dir"; then
    cat "$dir/ready"
    return 0
  fi
  rm -f "$dir/ready"
  # A fresh log per start: `start` looks in it for this start's readiness line.
  [[ -f "$dir/log" ]] && mv "$dir/log" "$dir/log.previous"
  if [[ -z "$port" ]]; then
    # Reuse the port of an earlier start in DIR: clients may remember it.
    port="$(sed -n 's/^# client-port=//p' "$dir/server.properties" 2>/dev/null || true)"
    [[ -n "$port" ]] || port="$(free_port)"
  fi
  local controller_port
  controller_port="$(sed -n 's/^# controller-port=//p' "$dir/server.properties" 2>/dev/null || true)"
  [[ -n "$controller_port" ]] || controller_port="$(free_port)"
  cat >"$dir/server.properties" <<PROPS
# client-port=$port
# controller-port=$controller_port
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
transaction.max.timeout.ms=${KAFKA_TRANSACTION_MAX_TIMEOUT_MS:-900000}
PROPS
  if [[ ! -f "$dir/data/meta.properties" ]]; then
    local cluster_id
    cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    "${JAVA[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" >"$dir/format.log" 2>&1 || {
      echo "kafka: formatting $dir/data failed:" >&2
      cat "$dir/format.log" >&2
      exit 1
    }
  fi
  (cd "$dir" && exec setsid "${JAVA[@]}" kafka.Kafka "$dir/server.properties" </dev/null >>"$dir/log" 2>&1) &
  local pid=$!
  echo "$pid" >"$dir/pid"
  if [[ -n "$watch" ]]; then
    # Stop the broker when the process that asked for it ends (a test binary).
    (setsid bash -c "while kill -0 $watch 2>/dev/null && kill -0 $pid 2>/dev/null; do sleep 1; done; kill -TERM $pid 2>/dev/null" \
      </dev/null >/dev/null 2>&1 &)
  fi
  local waited=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && grep -q "Kafka Server started" "$dir/log" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "kafka: the broker exited before it was ready; last log lines:" >&2
      tail -n 40 "$dir/log" >&2
      exit 1
    fi
    if ((waited >= START_TIMEOUT_S * 10)); then
      echo "kafka: the broker is not ready after ${START_TIMEOUT_S}s; see $dir/log" >&2
      stop "$dir"
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  echo "READY bootstrap=127.0.0.1:$port" | tee "$dir/ready"
}

stop() {
  local dir="${1:?usage: stop DIR}"
  [[ -f "$dir/pid" ]] || return 0
  stop_pid_file "$dir/pid" 15
  rm -f "$dir/ready"
}

status() {
  local dir="${1:?usage: status DIR}"
  print_ready_or_fail "$dir/pid" "$dir/ready" "kafka: no broker running in $dir"
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  stop) stop "${2:-}" ;;
  status) status "${2:-}" ;;
  *) echo "usage: $0 install | start DIR [PORT [PID]] | stop DIR | status DIR" >&2; exit 2 ;;
esac

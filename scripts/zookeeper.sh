#!/usr/bin/env bash
# ZooKeeper for development and tests (Debian's `zookeeper` package, 3.8).
#
#   scripts/zookeeper.sh install          install the package and a JRE if missing (idempotent)
#   scripts/zookeeper.sh check            exit 0 if the jars the tests use are present
#   scripts/zookeeper.sh start DIR PORT   run a standalone server in the foreground, data in DIR
#
# The zk-ha tests start their own servers (zk-ha/tests/common/mod.rs); they only need `install`.
set -euo pipefail

ZOOKEEPER_JAR=/usr/share/java/zookeeper.jar
SLF4J_SIMPLE_JAR=/usr/share/java/slf4j-simple.jar

have_all() {
    [[ -f "$ZOOKEEPER_JAR" && -f "$SLF4J_SIMPLE_JAR" ]] && command -v java >/dev/null 2>&1
}

install() {
    if have_all; then
        echo "zookeeper: already installed ($ZOOKEEPER_JAR)"
        return 0
    fi
    local sudo=""
    if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    # zookeeper pulls in a JRE; libslf4j-java provides slf4j-simple for server logging.
    $sudo apt-get install -y -qq --no-install-recommends zookeeper libslf4j-java default-jre-headless
    # The package enables a system service on port 2181; the tests run their own servers.
    if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now zookeeper >/dev/null 2>&1 || true; fi
    have_all || { echo "zookeeper: install finished but $ZOOKEEPER_JAR or $SLF4J_SIMPLE_JAR or java is missing" >&2; exit 1; }
    echo "zookeeper: installed"
}

start() {
    local dir=${1:?data directory} port=${2:-2181}
    mkdir -p "$dir/data"
    cat >"$dir/zoo.cfg" <<CFG
tickTime=200
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
maxSessionTimeout=30000
CFG
    exec java -Xmx256m -cp "$ZOOKEEPER_JAR:$SLF4J_SIMPLE_JAR" org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg"
}

case "${1:-}" in
    install) install ;;
    check) have_all ;;
    start) shift; start "$@" ;;
    *) echo "usage: $0 install | check | start DIR [PORT]" >&2; exit 2 ;;
esac

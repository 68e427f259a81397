#!/usr/bin/env bash
# Installs what building and testing sluice needs on a fresh Debian machine, idempotently.
# usage: install-deps.sh [build|test]   (default: test = build needs plus test servers)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what="${1:-test}"

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "Installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Building: a C/C++ toolchain and cmake (aws-lc-sys), pkg-config, libclang (bindgen for RocksDB),
# zlib's headers (the bundled librdkafka of the Kafka connector links zlib).
apt_install build-essential cmake pkg-config libclang-dev zlib1g-dev

if [ "$what" = test ]; then
  # Java and Maven build the YARN test launcher (this kind of machine ships them).
  command -v mvn >/dev/null 2>&1 || apt_install maven
  command -v javac >/dev/null 2>&1 || apt_install openjdk-17-jdk-headless
  # A real browser for the web UI tests, and Node (>= 18) to drive it (engine/src/web/smoke.mjs).
  apt_install chromium
  command -v node >/dev/null 2>&1 || apt_install nodejs
  # iproute2 (`ip netns`, veth pairs, a bridge, blackhole routes): the partition tests run each
  # process on a host of its own, a network namespace (integration/src/hosts.rs).
  command -v ip >/dev/null 2>&1 || apt_install iproute2
  # A real ZooKeeper for the HA tests.
  [ -x scripts/zookeeper.sh ] && scripts/zookeeper.sh install
  # A real Prometheus that scrapes the metric reporters in the metrics test.
  [ -x scripts/prometheus.sh ] && scripts/prometheus.sh install
  # A real Kafka broker (KRaft) for the Kafka connector tests, its jars fetched with Maven.
  [ -x scripts/kafka.sh ] && scripts/kafka.sh install
  # A real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) for the
  # native Kubernetes tests, built once from the Go module proxy and cached outside the clone.
  apt_install etcd-server openssl
  [ -x scripts/kubernetes.sh ] && scripts/kubernetes.sh install
  # A real YARN (MiniYARNCluster) and HDFS (MiniDFSCluster) for the tests, built with Maven.
  [ -x scripts/yarn-minicluster.sh ] && scripts/yarn-minicluster.sh build
fi
exit 0

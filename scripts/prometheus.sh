#!/usr/bin/env bash
# Prometheus for the metrics integration test (Debian's `prometheus` package).
#
#   scripts/prometheus.sh install                     install the package if missing (idempotent)
#   scripts/prometheus.sh check                       exit 0 if the server binary is present
#   scripts/prometheus.sh start DIR PORT TARGETS...   run a server in the foreground on
#                                                     127.0.0.1:PORT, storage in DIR, scraping
#                                                     each host:port of TARGETS every second
set -euo pipefail

PROMETHEUS=/usr/bin/prometheus

have_all() {
    [[ -x "$PROMETHEUS" ]]
}

install() {
    if have_all; then
        echo "prometheus: already installed ($PROMETHEUS)"
        return 0
    fi
    local sudo=""
    if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    # The package would start a system service listening on every interface (port 9090); the
    # test runs its own server on loopback, so no service may start during the install.
    local policy=/usr/sbin/policy-rc.d
    local had_policy=false
    [[ -e $policy ]] && had_policy=true
    if ! $had_policy; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod +x "$policy"
    fi
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null || {
        $had_policy || $sudo rm -f "$policy"
        exit 1
    }
    $had_policy || $sudo rm -f "$policy"
    if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
    have_all || { echo "prometheus: install finished but $PROMETHEUS is missing" >&2; exit 1; }
    echo "prometheus: installed"
}

start() {
    local dir=${1:?storage directory} port=${2:?port}
    shift 2
    local targets=""
    for t in "$@"; do targets+="'$t', "; done
    mkdir -p "$dir/data"
    cat >"$dir/prometheus.yml" <<CFG
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: sluice
    static_configs:
      - targets: [${targets%, }]
CFG
    exec "$PROMETHEUS" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
        --web.listen-address="127.0.0.1:$port" --log.level=warn
}

case "${1:-}" in
    install) install ;;
    check) have_all ;;
    start) shift; start "$@" ;;
    *) echo "usage: $0 install | check | start DIR PORT TARGET..." >&2; exit 2 ;;
esac

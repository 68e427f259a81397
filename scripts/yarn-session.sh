#!/usr/bin/env bash
# A sluice session cluster on YARN, as Flink's bin/yarn-session.sh.
# usage: yarn-session.sh [-d] [-nm NAME] [-s SLOTS] [-tm MEM] [-jm MEM] [-qu QUEUE] [-id APPID]
#        yarn-session.sh --list | [-id APPID] --kill
# The ResourceManager comes from $HADOOP_CONF_DIR/yarn-site.xml or
# -D yarn.resourcemanager.webapp.address=HOST:PORT (and ...scheduler.address).
# With -d it returns once the JobManager answers and writes $TMPDIR/.yarn-properties-$USER, which
# `sluice run -t yarn-session`, `sluice list -m yarn-session` and `yarn-session.sh --kill` read.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/config.sh"
bin="$(find_sluice_bin)"
conf=()
[ -f "$SLUICE_CONF_DIR/config.yaml" ] && conf=(--config-dir "$SLUICE_CONF_DIR")
exec "$bin" "${conf[@]}" yarn-session "$@"

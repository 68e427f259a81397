#!/usr/bin/env bash
# usage: jobmanager.sh (start|start-foreground|stop|stop-all) [sluice -D key=value ...]
exec "$(dirname "${BASH_SOURCE[0]}")/daemon.sh" jobmanager "$@"

#!/usr/bin/env bash
# Checks the engine's layering (docs/architecture.md, "Layers"): a module may use `crate::` paths
# into its own module and into lower layers only, and no two files of one folder may import each
# other. Prints each offending line or pair of files; prints nothing and exits 0 when the
# layering holds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../engine/src"

# The layer of each top-level module, lowest first. Modules of one layer do not import each
# other either.
declare -A layer=(
  [allocator]=0 [logdir]=0 [logfile]=0 [pids]=0 [threads]=0 [timezone]=0
  [config]=1
  [common]=2 [security]=2
  [record]=3 [metrics]=3
  [state]=4
  [network]=5
  [checkpoint]=6
  [rpc]=7
  [ha]=8
  [api]=9
  [graph]=10 [connectors]=10
  [examples]=11
  [jobmanager]=12 [taskmanager]=12 [resource]=12
  [rest]=13
  [embedded]=14 [yarn]=14 [kubernetes]=14
  [cli]=15
)

status=0
while IFS=: read -r file line text; do
  from=${file%%/*}
  from=${from%.rs}
  [[ -n ${layer[$from]:-} ]] || continue # lib.rs, main.rs
  for to in $(grep -oE 'crate::[a-z_]+' <<<"$text" | sed 's/crate:://' | sort -u); do
    [[ $to == "$from" || -z ${layer[$to]:-} ]] && continue
    if ((layer[$to] >= layer[$from])); then
      echo "$file:$line: ${from} (layer ${layer[$from]}) uses ${to} (layer ${layer[$to]}): $text"
      status=1
    fi
  done
done < <(grep -rnE 'crate::[a-z_]+' --include='*.rs' . | sed 's|^\./||' | grep -vE '^[^:]+:[0-9]+:\s*//')

# Files of one folder that import each other (`super::x` or `crate::<folder>::x`).
shopt -s nullglob
for dir in */; do
  dir=${dir%/}
  for file in "$dir"/*.rs; do
    name=$(basename "$file" .rs)
    [[ $name == mod ]] && continue
    for other in $(grep -vE '^\s*//' "$file" | grep -oE "(super|crate::$dir)::[a-z_]+" | sed -E 's/.*:://' | sort -u); do
      [[ $other == "$name" || ! -f $dir/$other.rs ]] && continue
      if grep -vE '^\s*//' "$dir/$other.rs" | grep -qE "(super|crate::$dir)::$name\b"; then
        [[ $name < $other ]] && echo "$dir/$name.rs <-> $dir/$other.rs" && status=1
      fi
    done
  done
done
exit $status

#!/usr/bin/env bash
# Measures flashgen and its peers (PyTorch SDPA backends, FlexAttention) over
# the head-dimension sweep on this machine's GPU, then draws the comparison.
#
#   bash bench/run_sweep.sh [OUT_DIR] [--dims 64,128] [--skip-build]
#                           [--skip-flashgen] [--skip-peers]
#
# Writes into OUT_DIR (default bench/results/h200), with today's date:
#   flashgen_<date>.json  build/flashgen bench --json
#   peers_<date>.json     bench/peers.py --json
#   sweep_<date>.png      bench/plot.py (skipped where matplotlib is missing)
#   table_<date>.md       bench/plot.py --table
# --dims replaces the full sweep by a list of head dimensions; the --skip-*
# options reuse the JSON already in OUT_DIR for that date (e.g. to run the
# two halves as separate jobs).
set -euo pipefail
cd "$(dirname "$0")/.."

out_dir=bench/results/h200
dims_args=(--sweep)
build=1
run_flashgen=1
run_peers=1
while [ $# -gt 0 ]; do
  case "$1" in
    --dims) [ $# -ge 2 ] || { echo "run_sweep.sh: --dims needs a list, e.g. --dims 64,128" >&2; exit 2; }
            dims_args=(--dims "$2"); shift 2 ;;
    --dims=*) dims_args=(--dims "${1#--dims=}"); shift ;;
    --skip-build) build=0; shift ;;
    --skip-flashgen) run_flashgen=0; shift ;;
    --skip-peers) run_peers=0; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_sweep.sh: unknown option $1" >&2; exit 2 ;;
    *) out_dir="$1"; shift ;;
  esac
done

date_tag=$(date +%F)
flashgen_json="$out_dir/flashgen_$date_tag.json"
peers_json="$out_dir/peers_$date_tag.json"
plot_png="$out_dir/sweep_$date_tag.png"
table_md="$out_dir/table_$date_tag.md"
mkdir -p "$out_dir"
export PYTHONUNBUFFERED=1

if [ "$build" = 1 ] && [ "$run_flashgen" = 1 ]; then
  echo "== build" >&2
  bash scripts/build.sh
fi

if [ "$run_flashgen" = 1 ]; then
  echo "== flashgen bench -> $flashgen_json" >&2
  build/flashgen bench --backend cuda "${dims_args[@]}" \
    --kinds forward,backward,backward_atomic --json "$flashgen_json"
fi

if [ "$run_peers" = 1 ]; then
  echo "== peers -> $peers_json" >&2
  python3 bench/peers.py "${dims_args[@]}" --json "$peers_json"
fi

inputs=()
for file in "$flashgen_json" "$peers_json"; do
  [ -f "$file" ] && inputs+=("$file")
done
if [ ${#inputs[@]} -eq 0 ]; then
  echo "run_sweep.sh: no results to plot in $out_dir for $date_tag" >&2
  exit 1
fi

plot_args=(--table)
if python3 -c "import matplotlib" >/dev/null 2>&1; then
  plot_args+=(-o "$plot_png")
else
  echo "run_sweep.sh: matplotlib missing here; draw the PNG elsewhere with:" >&2
  echo "  python3 bench/plot.py ${inputs[*]} -o $plot_png" >&2
fi
echo "== plot -> $table_md" >&2
python3 bench/plot.py "${inputs[@]}" "${plot_args[@]}" > "$table_md"
cat "$table_md"

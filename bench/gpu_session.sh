#!/usr/bin/env bash
# One run on a GPU machine, in the order that matters when time is short:
# build, the GPU tests of the kernels not yet run on a GPU (each with a short
# timeout, so a kernel that never finishes cannot stall the rest), the rest
# of the GPU suite, the pipeline probes, a tuning of the table's copy paths,
# flashgen and the peers at the head dimensions of the issues' closing notes,
# fp32, and the Python tests on the GPU. Every step runs under its own time
# limit, cut to what is left of the budget; JSON and the tuned table go to
# OUT_DIR, the logs into OUT_DIR/logs.tar.gz at the end (a remote machine
# may return only a few files: the results come first).
#
#   bash bench/gpu_session.sh OUT_DIR [--budget SECONDS] [--steps LIST] [--new REGEX]
#                                     [--dims LIST] [--tune-dims LIST] [--kernel-cache ARCHIVE]
#
# --budget   wall-clock seconds for the whole run (default 560)
# --steps    which steps run, of build,sanitize,tests_new,compare,tests_rest,probe,tune,bench,
#            peers,f32,pytest,cpu,workloads (default: all but sanitize, compare, tune, cpu
#            and workloads)
# --compare  the other source tree the compare step times this one against
# --new      ctest regex of the tests to run first (default "Tma|Float32|WgmmaSplit")
# --dims     head dimensions of the bench and peers rows
#            (default 40,64,127,128,199,256,257,384,385,512)
# --tune-dims  head dimensions the tune step re-times (`flashgen tune --pipelines-only`,
#            causal and not, forward and backward) into a copy of data/tuning/sm90.json
#            that the later steps use (OUT_DIR/sm90.json)
# --kernel-cache  a .tgz of a kernel cache folder made elsewhere
#            (`flashgen precompile --sweep` into $FLASHGEN_CACHE_DIR, then tar);
#            unpacked under /tmp and used as FLASHGEN_CACHE_DIR
# --workloads  options of bench/workloads.py in the workloads step (default: the whole suite,
#            every system)
set -uo pipefail
cd "$(dirname "$0")/.."

out=${1:-}
[ -n "$out" ] || { echo "usage: bash bench/gpu_session.sh OUT_DIR [--budget S] [--steps LIST] [--new REGEX] [--dims LIST] [--tune-dims LIST] [--kernel-cache ARCHIVE] [--compare DIR] [--workloads OPTIONS]" >&2; exit 2; }
shift
budget=560
compare_source=""
workload_options=""
steps=build,tests_new,tests_rest,probe,bench,peers,f32,pytest
new_tests="Tma|Float32|WgmmaSplit"
dims=40,64,127,128,199,256,257,384,385,512
tune_dims=32,64,96,128,160,192,224,256
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --tune-dims) tune_dims=$2; shift 2 ;;
    --new) new_tests=$2; shift 2 ;;
    --dims) dims=$2; shift 2 ;;
    --compare) compare_source=$2; shift 2 ;;
    --workloads) workload_options=$2; shift 2 ;;
    --kernel-cache)
      cache_root=$(mktemp -d /tmp/flashgen_cache.XXXXXX)
      tar -C "$cache_root" -xzf "$2" || { echo "gpu_session.sh: cannot unpack $2" >&2; exit 2; }
      # The archive holds one folder: the cache directory.
      export FLASHGEN_CACHE_DIR=$(find "$cache_root" -mindepth 1 -maxdepth 1 -type d | head -1)
      shift 2 ;;
    *) echo "gpu_session.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
start=$(date +%s)
date_tag=$(date +%F)

# step NAME SECONDS COMMAND...: runs COMMAND with at most SECONDS (or what is
# left of the budget), its output in OUT_DIR/NAME.log; prints the outcome.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$(( budget - ($(date +%s) - start) ))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -le 5 ]; then
    echo "== $name: skipped, the budget is spent" | tee "$out/$name.log"
    return
  fi
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc at $(( $(date +%s) - start )) s (limit $limit s)"
}

wanted() { [[ ",$steps," == *",$1,"* ]]; }

summary() {  # the tests that passed, failed or timed out in a ctest log
  grep -E "tests passed|\*\*\*|Failed|Timeout" "$1" | grep -v "^ *[0-9]*/[0-9]* Test .* Passed" | head -30
}

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if wanted build; then
  step build 200 bash -c "cmake -S . -B build-gpu ${generator[*]} -DCMAKE_BUILD_TYPE=Release &&
    cmake --build build-gpu --parallel $(nproc)"
  tail -3 "$out/build.log"
fi

# The sanitizer sweep (scripts/sanitize.py: memcheck, racecheck, synccheck
# and initcheck over every kernel family, and racecheck's verdict on the
# producer's hand-over pattern alone).
if wanted sanitize; then
  step sanitize 420 python3 scripts/sanitize.py --flashgen build-gpu/flashgen --jobs 12 \
    --out "$out/sanitize_${date_tag}.json" --raw "$out/sanitize_raw" --log "$out/sanitize_problems.txt"
  tail -45 "$out/sanitize.log"
fi

if wanted tests_new; then
  step tests_new 150 bash -c "cd build-gpu && ctest -L gpu -R '$new_tests' --parallel 4 --timeout 120 \
    --output-on-failure"
  summary "$out/tests_new.log"
fi

# This tree against another source tree of flashgen, timed alternately on
# this GPU (bench/compare_builds.sh; --compare DIR).
if wanted compare && [ -n "$compare_source" ]; then
  step compare 240 bash bench/compare_builds.sh "$compare_source" "$out/compare"
  cat "$out/compare.log"
fi

if wanted tests_rest; then
  step tests_rest 240 bash -c "cd build-gpu && ctest -L gpu -E '$new_tests' --parallel $(nproc) \
    --timeout 200 --output-on-failure"
  summary "$out/tests_rest.log"
fi

if wanted probe; then
  step probe_pipeline 150 bash bench/lab/probe_pipeline.sh --no-tests
  cat "$out/probe_pipeline.log"
fi

if wanted tune; then
  # The user table of the cache directory: the steps after this one use it.
  [ -n "${FLASHGEN_CACHE_DIR:-}" ] || export FLASHGEN_CACHE_DIR=$(mktemp -d /tmp/flashgen_cache.XXXXXX)
  table="$FLASHGEN_CACHE_DIR/tuning/sm90.json"
  mkdir -p "$(dirname "$table")"
  left=$(( budget - ($(date +%s) - start) ))
  step tune 400 build-gpu/flashgen tune --dims "$tune_dims" --causal both --kinds forward,backward \
    --dtype bf16 --pipelines-only --list-timed --merge data/tuning/sm90.json \
    --out "$table" \
    --time-limit "$(( (left > 400 ? 400 : left) / 60 ))"
  grep -E "^(bf16|  )|time limit" "$out/tune.log" | head -80
  cp "$table" "$out/sm90.json" 2>/dev/null
fi

if wanted bench; then
  step bench 120 build-gpu/flashgen bench --backend cuda --dims "$dims" \
    --kinds forward,backward,backward_atomic --json "$out/flashgen_${date_tag}_key_dims.json"
  grep -E "^ *[0-9]+ |rror" "$out/bench.log"
fi

if wanted peers; then
  step peers 150 python3 bench/peers.py --dims "$dims" --time-budget-s 0.5 \
    --json "$out/peers_${date_tag}_key_dims.json"
  tail -2 "$out/peers.log"
fi

# fp32: flashgen and the peers (whose FLASH and CUDNN backends refuse it).
if wanted f32; then
  step bench_f32 60 build-gpu/flashgen bench --backend cuda --dtype f32 \
    --dims 64,128,256,512 --repeats 5 --warmup 2 --json "$out/flashgen_${date_tag}_f32.json"
  grep -E "^ *[0-9]+ |rror" "$out/bench_f32.log"
  step peers_f32 60 python3 bench/peers.py --dims 64,128,256,512 --dtype f32 --time-budget-s 0.3 \
    --json "$out/peers_${date_tag}_f32.json"
  tail -2 "$out/peers_f32.log"
fi

if wanted pytest; then
  # One process per test file (about 3 minutes in all; one process takes
  # longer than that): each compiles its own kernels, the cache is shared.
  step pytest 220 bash -c 'for f in python/tests/test_*.py; do
      FLASHGEN_LIBRARY="$PWD/build-gpu/libflashgen.so" python3 -m pytest -q "$f" \
        > "$0/pytest_$(basename "$f" .py).log" 2>&1 &
    done; wait' "$out"
  for f in "$out"/pytest_*.log; do echo "$(basename "$f"): $(tail -1 "$f")"; done
fi

# The CPU backend against torch's CPU attention with every core of the host.
if wanted cpu; then
  step cpu 200 env FLASHGEN_LIBRARY="$PWD/build-gpu/libflashgen.so" python3 bench/cpu_vs_torch.py \
    --threads "$(nproc)" --out "$out/cpu_vs_torch_${date_tag}.json"
  tail -20 "$out/cpu.log"
fi

# The workload suite with the peers (bench/workloads.py).
if wanted workloads; then
  # The suite's kernels compiled first, on every core (a first call compiles
  # its kernels one after the other).
  step precompile 90 bash bench/precompile_workloads.sh build-gpu/flashgen
  step workloads 560 env FLASHGEN_LIBRARY="$PWD/build-gpu/libflashgen.so" python3 bench/workloads.py \
    --json "$out/workloads_${date_tag}.json" $workload_options
  grep -v "^\[" "$out/workloads.log" | tail -45
fi

# The step logs (and the sanitizer's raw reports) as one archive beside the
# JSON (each step printed its summary above).
if compgen -G "$out/*.log" > /dev/null; then
  extra=()
  [ -d "$out/sanitize_raw" ] && extra=(sanitize_raw)
  tar -C "$out" -czf "$out/logs.tar.gz" $(cd "$out" && ls *.log) "${extra[@]}" &&
    rm -rf "$out"/*.log "$out/sanitize_raw"
fi

#!/usr/bin/env bash
# Compiles the kernels bench/workloads.py's suite calls into the kernel cache
# ($FLASHGEN_CACHE_DIR or the default), with NVRTC on every core and no GPU,
# so that a GPU session spends its time timing, not compiling: the plain
# head dimensions (causal and not), the decode steps (over KV caches too,
# 16-bit and fp8), the packed sequences, and each row's masks and score
# modifiers (Gemma 2, gpt-oss, Mistral, documents, the mask row).
#
#   bash bench/precompile_workloads.sh [FLASHGEN]   (default build-gpu/flashgen)
set -uo pipefail
cd "$(dirname "$0")/.."
flashgen=${1:-build-gpu/flashgen}
threads=$(nproc)
run() { "$flashgen" precompile --threads "$threads" "$@" 2>/dev/null | tail -1; }
run --dims 40,64,80,127,128,192,199,256,257,385,512 --causal both
run --dims 128 --kinds forward --decode 4,8
run --dims 64 --kinds forward --decode 8 --causal 1 --sinks
run --dims 256 --kinds forward --decode 2 --causal 1 --window=4096,0 --softcap 50
run --dims 256 --causal 1 --window=4096,0 --softcap 50
run --dims 256 --causal 1 --window=4096,0
run --dims 128 --causal 1 --window=4096,0
run --dims 64 --causal 1 --window=128,0 --sinks
run --dims 64 --causal 1 --window=128,0
run --dims 128 --causal both --mask-mod 'doc[kv_idx] == doc[q_idx]' --mask-arrays doc:i
run --dims 128 --kinds forward --decode 4 --mask-mod 'kv_idx >= 0'
run --dims 128 --kinds forward --decode 4 --kv-cache both
run --dims 128 --kinds forward --decode 4 --kv-cache both --fp8-cache
run --dims 256 --kinds forward --decode 2 --kv-cache paged --causal 1
run --dims 128 --causal 1 --varlen --seqs 1024,8192

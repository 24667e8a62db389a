#!/usr/bin/env bash
# The GPU check (issue 36), on a node with one GPU, PyTorch and no network, from the kit that
# scripts/gpu_kit packed on a CPU machine (the cuda build, the libraries it loads, the CPU build's
# reference losses). Each step is timed and its outcome recorded; a failing step does not stop the
# next. Steps run most telling first, and a step that would not finish before the deadline
# (GPU_CHECK_SECONDS, default 480) is skipped and says so: a lease of a few minutes still brings back
# the figures that matter. A step is also stopped at three times its expected length and 30 s, so a
# kernel that hangs costs one step, not the lease. Writes OUT/gpu_check.md (the summary, also printed
# last), OUT/gpu_check.log (every step's output, appended as each ends) and the benchmarks' JSON:
# eight files at most, within what a device lease brings back.
#   bash bench/gpu_check.sh [KIT] [OUT]     (defaults: gpu-kit.tar.xz, $OUT or gpu-check-out)
# The GPU build's defaults are cuBLASLt's fused epilogues, the row kernels a warp per row and, under
# bf16, version 3 of our flash kernels; "kernels" is those defaults, or version 1 of the flash kernels
# where version 3's kernel tests fail, and the candidate CUDA row kernels (TRIDENT_FUSED_NORMS=1,
# TRIDENT_FUSED_CROSS_ENTROPY=1) where their kernel tests pass; "previous" the defaults before 2026-11-28
# (TRIDENT_FLASH_VERSION=1 TRIDENT_WARP_ROWS=0); "plain" TRIDENT_FUSED_EPILOGUES=0
# TRIDENT_FLASH_ATTENTION=0. Steps, in order:
#   node            nvidia-smi; every library of the kit's executables resolves
#   libraries_flash the flash kernels (the default version) against the CPU build's tiled attention
#                   (bf16, trident_gpu_tests)
#   libraries_rows  the CUDA norm backward and cross-entropy against the CPU build's Kokkos kernels
#                   (trident_gpu_tests), each a candidate for the steps after where its tests pass
#   equivalence     the small deck's 5 losses against the CPU build's: fp32 1e-4, TF32 2e-3, bf16 three
#                   times the CPU build's own noise from the order of sums, at least 1e-4 (also with
#                   train.cuda_graph), and tp 2 x pp 2 on the one GPU (parallel.share_device) against
#                   one rank, 1e-4
#   graph           train.cuda_graph's recorded actions replayed on a small model against the same
#                   steps run directly (tests/model/graphed_stage_test.cpp)
#   unit_kernels    the GPU build's kernel tests, strict fp32 (NVIDIA_TF32_OVERRIDE=0), with "kernels"
#   profile_*       step_census --time at GPT-2's shape, later Llama's, in bf16: the device's
#                   milliseconds per kernel label and per product, and the step's time no kernel
#                   covers (OUT/profile_*.json); on an H100 or H200 also each one's time predicted
#                   from its declared cost by the card's machine file (--machine)
#   gpt2            GPT-2 124M, T 1024, B 8, trident in bf16 against PyTorch bf16-sdpa and
#                   bf16-sdpa-compile (issue 36's target; GPU_CHECK_TORCH=none leaves PyTorch out)
#   gpt2_graph      GPT-2 with train.cuda_graph = true
#   llama_1b        Llama 3.2 1B's shape, T 4096, B 4 (B 2 below 100 GB of GPU memory), as GPT-2
#   ncu_flash       Nsight Compute's view of the flash kernels at GPT-2's shape
#   *_previous      GPT-2 and Llama with the previous defaults
#   the rest        cuBLAS (fp32, TF32, bf16) against the CPU BLAS, the census in bf16, the kernel
#                   tests with a team per row, the model tests, "plain" (equivalence, GPT-2, Llama),
#                   GPT-2 in TF32 against PyTorch tf32-explicit, the census in TF32, NCCL's
#                   collectives on one rank, trident's export loaded by `transformers`
#                   (from_pretrained; skipped without it), version 2 of the flash kernels
# GPU_CHECK_STEPS="name ..." runs only the steps named (a second, shorter lease).
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
kit_file="$(realpath "${1:-$repo/gpu-kit.tar.xz}")"
out="$(realpath -m "${2:-${OUT:-$repo/gpu-check-out}}")"
deadline="${GPU_CHECK_SECONDS:-480}"
mkdir -p "$out"
[ -f "$kit_file" ] || { echo "gpu_check: no kit at $kit_file (scripts/gpu_kit makes it)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xJf "$kit_file" -C "$work"
kit="$work/gpu-kit"
logs="$work/logs"
mkdir -p "$logs"
summary="$out/gpu_check.md"
python=python3  # the node's, with PyTorch; never given the kit's libraries

{
  echo "# GPU check, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| step | outcome | seconds |"
  echo "|---|---|---:|"
} > "$summary"
: > "$out/gpu_check.log"

# step NAME SECONDS [VAR=VALUE ...] COMMAND...: runs COMMAND (a program or one of the functions
# below) with those variables if SECONDS, its expected length, still fit before the deadline, and
# stops it at the deadline or at three times SECONDS and 30; its output goes to the log, its outcome
# to the summary and to $outcome.
outcome=""
step() {
  local name="$1" expected="$2" start=$SECONDS code limit
  shift 2
  outcome="not run"
  local variables=()
  while [[ "${1:-}" == [A-Z_]*=* ]]; do variables+=("$1"); shift; done
  if [ -n "${GPU_CHECK_STEPS:-}" ] && [[ " $GPU_CHECK_STEPS " != *" $name "* ]]; then return 0; fi
  if (( SECONDS + expected > deadline )); then
    echo "| $name | skipped (would end after the ${deadline} s deadline) | 0 |" >> "$summary"
    return 0
  fi
  echo "== $name: ${variables[*]} $*" | tee "$logs/$name.log"
  limit=$((deadline - SECONDS))
  (( limit > 3 * expected + 30 )) && limit=$((3 * expected + 30))
  timeout --kill-after=10 "$limit" env "${variables[@]}" bash -c '"$@"' "$name" "$@" \
    >> "$logs/$name.log" 2>&1
  code=$?
  case $code in
    0) outcome="passed" ;;
    77) outcome="skipped" ;;
    124|137) outcome="STOPPED after $limit s" ;;
    *) outcome="FAILED (exit $code)" ;;
  esac
  echo "| $name | $outcome | $((SECONDS - start)) |" >> "$summary"
  cat "$logs/$name.log" >> "$out/gpu_check.log"
  tail -5 "$logs/$name.log"
}

node_check() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv || return 1
  local missing=0
  for exe in "$kit"/libexec/*; do
    if "$kit/bin/with-kit" ldd "$exe" | grep "not found"; then missing=1; fi
  done
  return $missing
}

# The machine file of the card, for step_census --machine; none for another card.
machine_file() {
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
    *H200*) echo "$repo/input_decks/machines/dgx-h200.toml" ;;
    *H100*) echo "$repo/input_decks/machines/dgx-h100.toml" ;;
  esac
}

# rows_passed SUITE: whether libraries_rows ran every test of SUITE and none failed.
rows_passed() {
  "$python" - "$work/rows.json" "$1" <<'PY'
import json, sys
try:
    suites = {s["name"]: s for s in json.load(open(sys.argv[1]))["testsuites"]}
except (OSError, ValueError, KeyError):
    sys.exit(1)
suite = suites.get(sys.argv[2])
ran = suite and all(t.get("result") == "COMPLETED" for t in suite["testsuite"])
sys.exit(0 if ran and suite["failures"] == 0 and suite.get("errors", 0) == 0 else 1)
PY
}

gpu_memory_gib() { nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{print int($1 / 1024)}'; }

equivalence() {
  TRIDENT_EXE="$kit/bin/trident" TRIDENT_CPU_LOSSES="$kit/reference/cpu_losses.json" TRIDENT_MPIEXEC="$kit/bin/mpirun" \
    "$python" -m pytest -q -p no:cacheprovider -rs "$@" "$repo/tests/gpu/test_gpu_equivalence.py"
}
bench() {
  "$python" "$repo/bench/single_rank.py" --device cuda --trident "$kit/bin/trident" --steps 6 --warmup 2 "$@"
}
census() {
  "$kit/bin/step_census" "$repo/input_decks/tiny.toml" --set parallel.tp=1 --set parallel.pp=1 \
    --set parallel.dp=1 --set schedule.microbatches=1 --set model.layers=12 "$@"
}
# profile NAME DECK SETTING...: one step timed on the device at a benchmark's shape, into OUT/profile_NAME.json.
profile() {
  local name="$1" deck="$2"; shift 2
  local args=(--set parallel.tp=1 --set parallel.pp=1 --set parallel.dp=1 --set schedule.microbatches=1)
  for setting in "$@"; do args+=(--set "$setting"); done
  local machine; machine="$(machine_file)"
  [ -n "$machine" ] && args+=(--machine "$machine")
  "$kit/bin/step_census" "$repo/input_decks/$deck" --time "${args[@]}" | tee "$out/profile_$name.json"
}
gpt2_shape=(model.layers=12 model.d_model=768 model.heads=12 model.vocab=50304 model.seq_len=1024
            schedule.micro_batch_size=8)
llama_shape=(model.layers=16 model.d_model=2048 model.heads=32 model.kv_heads=8 model.ffn_hidden=8192
             model.vocab=128256 model.tie_embeddings=true model.seq_len=4096)
export kit repo python out
export -f node_check equivalence bench census profile machine_file
plain=(TRIDENT_FLASH_ATTENTION=0 TRIDENT_FUSED_EPILOGUES=0)
previous=(TRIDENT_FLASH_VERSION=1 TRIDENT_WARP_ROWS=0)
llama_batch=4
torch="${GPU_CHECK_TORCH:-bf16-sdpa,bf16-sdpa-compile}"

step node 10 node_check
[ "$(gpu_memory_gib)" -lt 100 ] && llama_batch=2
# The flash kernels are checked first; the steps after take version 1 if the default fails, so that
# their timings measure kernels that passed.
kernels=()
step libraries_flash 20 "$kit/bin/trident_gpu_tests" --gtest_filter='FlashAttention.*'
[ "$outcome" = passed ] || kernels=(TRIDENT_FLASH_VERSION=1)
step libraries_rows 15 "$kit/bin/trident_gpu_tests" --gtest_filter='NormBackward.*:CrossEntropy.*' \
  --gtest_output=json:"$work/rows.json"
for candidate in NormBackward:TRIDENT_FUSED_NORMS CrossEntropy:TRIDENT_FUSED_CROSS_ENTROPY; do
  rows_passed "${candidate%%:*}" && kernels+=("${candidate#*:}=1")
done
step equivalence 60 "${kernels[@]}" equivalence
step graph 20 "${kernels[@]}" NVIDIA_TF32_OVERRIDE=0 "$kit/bin/trident_model_tests" --gtest_filter='GraphedStage.*'
step unit_kernels 30 "${kernels[@]}" NVIDIA_TF32_OVERRIDE=0 "$kit/bin/trident_kernels_tests"
step profile_gpt2_bf16 20 "${kernels[@]}" profile gpt2_bf16 tiny.toml "${gpt2_shape[@]}" train.precision=bf16
step gpt2 70 "${kernels[@]}" bench --configs gpt2-1024 --precision bf16 --torch "$torch" --json "$out/gpt2.json"
step gpt2_graph 25 "${kernels[@]}" bench --configs gpt2-1024 --precision bf16 --torch none --set train.cuda_graph=true
step profile_llama_1b_bf16 110 "${kernels[@]}" profile llama_1b_bf16 llama-tiny.toml "${llama_shape[@]}" \
  schedule.micro_batch_size="$llama_batch" train.precision=bf16
step llama_1b 220 "${kernels[@]}" bench --configs llama-1b --batch "$llama_batch" --precision bf16 --torch "$torch" \
  --json "$out/llama_1b.json"
# Nsight Compute on the second step's last forward and the first dQ and dK-dV launches (step 1 and
# 11 of 12 layers' forwards skipped) at GPT-2's shape: throughput against the peaks, occupancy, and
# where the warps stall.
step ncu_flash 60 "${kernels[@]}" ncu --target-processes all --kernel-name regex:flash_ \
  --launch-skip 47 --launch-count 3 --section SpeedOfLight --section Occupancy --section WarpStateStats \
  "$kit/bin/step_census" "$repo/input_decks/tiny.toml" --set parallel.tp=1 --set parallel.pp=1 \
  --set parallel.dp=1 --set schedule.microbatches=1 $(printf -- '--set %s ' "${gpt2_shape[@]}") \
  --set train.precision=bf16
step gpt2_previous 25 "${previous[@]}" bench --configs gpt2-1024 --precision bf16 --torch none
step llama_1b_previous 90 "${previous[@]}" bench --configs llama-1b --batch "$llama_batch" --precision bf16 --torch none
step libraries_cublas 30 NVIDIA_TF32_OVERRIDE=0 "$kit/bin/trident_gpu_tests" \
  --gtest_filter='-FlashAttention.*:NormBackward.*:CrossEntropy.*'
step census 20 "${kernels[@]}" census --set train.precision=bf16
step unit_kernels_team_rows 30 TRIDENT_WARP_ROWS=0 NVIDIA_TF32_OVERRIDE=0 "$kit/bin/trident_kernels_tests"
step unit_model 60 NVIDIA_TF32_OVERRIDE=0 "$kit/bin/trident_model_tests"
step equivalence_plain 60 "${plain[@]}" equivalence
step gpt2_tf32 45 bench --configs gpt2-1024 --torch tf32-explicit
step gpt2_bf16_plain 25 "${plain[@]}" bench --configs gpt2-1024 --precision bf16 --torch none
step census_tf32 20 census
step libraries_nccl 15 "$kit/bin/mpirun" -n 1 "$kit/libexec/trident_gpu_mpi_tests" \
  "--gtest_filter=-*PointToPoint*:NcclPipelineCommTest.*"
step hf_from_pretrained 40 "$python" "$repo/bench/hf_from_pretrained.py" --trident "$kit/bin/trident" \
  --mpirun "$kit/bin/mpirun"
step libraries_v2 20 TRIDENT_FLASH_VERSION=2 "$kit/bin/trident_gpu_tests" --gtest_filter='FlashAttention.*'
step llama_1b_plain 90 "${plain[@]}" bench --configs llama-1b --batch "$llama_batch" --precision bf16 --torch none

{
  echo
  echo "GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1); Llama batch $llama_batch; kernels: ${kernels[*]}"
  for name in gpt2 llama_1b gpt2_graph gpt2_previous llama_1b_previous gpt2_tf32 gpt2_bf16_plain llama_1b_plain; do
    [ -f "$logs/$name.log" ] || continue
    echo
    echo "### $name"
    echo '```'
    grep -B3 -A2 "config  *ms/step" "$logs/$name.log" || echo "(no table: see gpu_check.log)"
    echo '```'
  done
  for name in profile_gpt2_bf16 profile_llama_1b_bf16; do
    [ -f "$logs/$name.log" ] || continue
    echo
    echo "### $name: predicted against measured, the 25 slowest predicted (all in gpu_check.log)"
    echo '```'
    grep -A26 "^step_census: one step on" "$logs/$name.log" || echo "(no table: see gpu_check.log)"
    echo '```'
  done
} >> "$summary"
echo
cat "$summary"

#!/usr/bin/env bash
# The GPU check (issue 36), on a node with one GPU, PyTorch and no network, from the kit that
# scripts/gpu_kit packed on a CPU machine (the cuda build, the libraries it loads, the CPU build's
# reference losses). Each step is timed and its outcome recorded; a failing step does not stop the
# next. Writes OUT/gpu_check.md (the summary, also printed last), OUT/single_rank.json and a log per
# step. About 8 minutes on an H100 or H200.
#   bash bench/gpu_check.sh [KIT] [OUT]     (defaults: gpu-kit.tar.xz, $OUT or gpu-check-out)
# Steps:
#   node         nvidia-smi; every library of the kit's executables resolves
#   unit         the GPU build's kernel and model tests, strict fp32 (NVIDIA_TF32_OVERRIDE=0)
#   libraries    cuBLAS (fp32, TF32, bf16) against the CPU BLAS, our flash-attention kernels against the
#                CPU build's tiled attention (bf16); NCCL collectives on one rank
#   census       bench/step_census on the GPU build: one step's launches, products and host waits
#                (census_flash: in bf16 with our fused attention, whose three launches per layer it counts)
#   equivalence  the small deck's 5 losses against the CPU build's: fp32 1e-4, TF32 2e-3, bf16 1e-4,
#                and tp 2 x pp 2 on the one GPU (parallel.share_device) against one rank, 1e-4
#   gpt2         GPT-2 124M, T 1024, B 8: trident against PyTorch tf32-explicit, bf16-sdpa, bf16-sdpa-compile
#   *_fused      the equivalence and GPT-2's time again with cuBLASLt's fused epilogues (TRIDENT_FUSED_EPILOGUES=1)
#   *_flash      the bf16 equivalence and GPT-2's bf16 time with our fused attention kernels
#                (TRIDENT_FLASH_ATTENTION=1; GPT-2's with the fused epilogues too); the unit step has
#                already compared each of those kernels with the CPU build's tiled attention
#   llama-1b     Llama 3.2 1B's shape, T 4096, B 4 (B 2 below 100 GB of GPU memory), trident in bf16:
#                against bf16-sdpa and bf16-sdpa-compile (the explicit softmax does not fit at T 4096);
#                llama_1b_flash: again with the fused attention and epilogues
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
kit_file="$(realpath "${1:-$repo/gpu-kit.tar.xz}")"
out="$(realpath -m "${2:-${OUT:-$repo/gpu-check-out}}")"
mkdir -p "$out"
[ -f "$kit_file" ] || { echo "gpu_check: no kit at $kit_file (scripts/gpu_kit makes it)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xJf "$kit_file" -C "$work"
kit="$work/gpu-kit"
summary="$out/gpu_check.md"
python=python3  # the node's, with PyTorch; never given the kit's libraries

{
  echo "# GPU check, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| step | outcome | seconds |"
  echo "|---|---|---:|"
} > "$summary"

# step NAME COMMAND...: runs it with its output in OUT/NAME.log, one row in the summary.
step() {
  local name="$1"; shift
  local start=$SECONDS
  echo "== $name: $*" | tee "$out/$name.log"
  "$@" >> "$out/$name.log" 2>&1
  local code=$?
  local outcome="passed"
  [ $code -eq 77 ] && outcome="skipped"
  [ $code -ne 0 ] && [ $code -ne 77 ] && outcome="FAILED (exit $code, see $name.log)"
  echo "| $name | $outcome | $((SECONDS - start)) |" >> "$summary"
  tail -5 "$out/$name.log"
}

node_check() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv || return 1
  local missing=0
  for exe in "$kit"/libexec/*; do
    if "$kit/bin/with-kit" ldd "$exe" | grep "not found"; then missing=1; fi
  done
  return $missing
}

gpu_memory_gib() { nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{print int($1 / 1024)}'; }

step node node_check
export NVIDIA_TF32_OVERRIDE=0
step unit_kernels "$kit/bin/trident_kernels_tests"
step unit_model "$kit/bin/trident_model_tests"
step libraries_cublas "$kit/bin/trident_gpu_tests"
step libraries_nccl "$kit/bin/mpirun" -n 1 "$kit/libexec/trident_gpu_mpi_tests" \
  "--gtest_filter=-*PointToPoint*:NcclPipelineCommTest.*"
unset NVIDIA_TF32_OVERRIDE
step census "$kit/bin/step_census" "$repo/input_decks/tiny.toml" --set parallel.tp=1 --set parallel.pp=1 \
  --set parallel.dp=1 --set schedule.microbatches=1 --set model.layers=12
step census_flash env TRIDENT_FLASH_ATTENTION=1 "$kit/bin/step_census" "$repo/input_decks/tiny.toml" \
  --set parallel.tp=1 --set parallel.pp=1 --set parallel.dp=1 --set schedule.microbatches=1 --set model.layers=12 \
  --set train.precision=bf16
step equivalence env TRIDENT_EXE="$kit/bin/trident" TRIDENT_CPU_LOSSES="$kit/reference/cpu_losses.json" \
  TRIDENT_MPIEXEC="$kit/bin/mpirun" \
  "$python" -m pytest -q -p no:cacheprovider -rs "$repo/tests/gpu/test_gpu_equivalence.py"

llama_batch=4
[ "$(gpu_memory_gib)" -lt 100 ] && llama_batch=2
bench() {
  "$python" "$repo/bench/single_rank.py" --device cuda --trident "$kit/bin/trident" --steps 6 --warmup 2 "$@"
}
step gpt2 bench --configs gpt2-1024 --torch tf32-explicit,bf16-sdpa,bf16-sdpa-compile --json "$out/gpt2.json"
# cuBLASLt with the epilogues fused (TRIDENT_FUSED_EPILOGUES=1): equal to the CPU build, and how fast.
step equivalence_fused env TRIDENT_FUSED_EPILOGUES=1 TRIDENT_EXE="$kit/bin/trident" \
  TRIDENT_CPU_LOSSES="$kit/reference/cpu_losses.json" TRIDENT_MPIEXEC="$kit/bin/mpirun" \
  "$python" -m pytest -q -p no:cacheprovider -rs -k "not grid" "$repo/tests/gpu/test_gpu_equivalence.py"
step gpt2_fused env TRIDENT_FUSED_EPILOGUES=1 "$python" "$repo/bench/single_rank.py" --device cuda \
  --trident "$kit/bin/trident" --steps 6 --warmup 2 --configs gpt2-1024 --torch none
# Our flash-attention kernels (TRIDENT_FLASH_ATTENTION=1, bf16 only): equal to the CPU build, and how fast.
step equivalence_flash env TRIDENT_FLASH_ATTENTION=1 TRIDENT_EXE="$kit/bin/trident" \
  TRIDENT_CPU_LOSSES="$kit/reference/cpu_losses.json" TRIDENT_MPIEXEC="$kit/bin/mpirun" \
  "$python" -m pytest -q -p no:cacheprovider -rs -k "bf16" "$repo/tests/gpu/test_gpu_equivalence.py"
step gpt2_flash env TRIDENT_FLASH_ATTENTION=1 TRIDENT_FUSED_EPILOGUES=1 "$python" "$repo/bench/single_rank.py" \
  --device cuda --trident "$kit/bin/trident" --steps 6 --warmup 2 --configs gpt2-1024 --precision bf16 --torch none
# The issue's Llama target is in bf16: trident in bf16 (its default kernels), then with our fused
# attention and the fused epilogues, against PyTorch's bf16 runs.
step llama_1b bench --configs llama-1b --batch "$llama_batch" --precision bf16 \
  --torch bf16-sdpa,bf16-sdpa-compile --json "$out/llama_1b.json"
step llama_1b_flash env TRIDENT_FLASH_ATTENTION=1 TRIDENT_FUSED_EPILOGUES=1 "$python" "$repo/bench/single_rank.py" \
  --device cuda --trident "$kit/bin/trident" --steps 6 --warmup 2 --configs llama-1b --batch "$llama_batch" \
  --precision bf16 --torch none

{
  echo
  echo "GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1); Llama batch $llama_batch"
  for name in gpt2 gpt2_fused gpt2_flash llama_1b llama_1b_flash; do
    echo
    echo "### $name"
    echo '```'
    grep -A4 "^config " "$out/$name.log" || echo "(no table: see $name.log)"
    echo '```'
  done
} >> "$summary"
echo
cat "$summary"

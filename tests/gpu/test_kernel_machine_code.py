"""trident's own CUDA kernels (src/gpu/*.cu) as nvcc builds them for Hopper (sm_90), read without a
GPU: ptxas's resource report must show no spills and no stack frame for any kernel (a spilled
accumulator goes to local memory, many times slower), and the PTX must show what each kernel is
written to do: its products on the tensor cores (wmma.mma.sync bf16 -> fp32) and its tiles loaded
and its rows stored 16 bytes at a time."""
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("TRIDENT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
NVCC = os.environ.get("TRIDENT_NVCC", "/usr/local/cuda/bin/nvcc")
KERNELS = ["flash_forward", "flash_query_grads", "flash_key_grads"]
HEAD_DIMS = [16, 32, 64, 96, 128]


@pytest.fixture(scope="module")
def build():
    """ptxas's report per kernel entry and the PTX text per kernel entry."""
    with tempfile.TemporaryDirectory() as keep:
        result = subprocess.run(
            [NVCC, "-arch=sm_90", "-O3", "-std=c++17", f"-I{SOURCE_DIR / 'src'}", "-cubin", "-Xptxas", "-v",
             "--keep", "--keep-dir", keep, "-o", str(Path(keep) / "flash_attention.cubin"),
             str(SOURCE_DIR / "src/gpu/flash_attention.cu")],
            capture_output=True, text=True, check=True)
        ptx = next(Path(keep).glob("*.ptx")).read_text()
    return resources_by_entry(result.stderr), ptx_by_entry(ptx)


def resources_by_entry(report):
    """{mangled entry: (stack bytes, spill store bytes, spill load bytes, registers)}."""
    entries = {}
    for block in re.split(r"ptxas info\s+: Compiling entry function ", report)[1:]:
        name = re.match(r"'(\w+)'", block).group(1)
        stack, stores, loads = map(int, re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block).groups())
        registers = int(re.search(r"Used (\d+) registers", block).group(1))
        entries[name] = (stack, stores, loads, registers)
    return entries


def ptx_by_entry(ptx):
    """{mangled entry: its PTX body}."""
    parts = re.split(r"\.visible \.entry |\.entry ", ptx)[1:]
    return {re.match(r"(\w+)", part).group(1): part for part in parts}


def entry(table, kernel, head_dim):
    names = [name for name in table if f"{kernel}ILi{head_dim}E" in name]
    assert len(names) == 1, f"{kernel}<{head_dim}> among {sorted(table)}"
    return table[names[0]]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_no_spills_and_no_stack(build, kernel, head_dim):
    stack, stores, loads, registers = entry(build[0], kernel, head_dim)
    assert (stack, stores, loads) == (0, 0, 0), f"{kernel}<{head_dim}>: {registers} registers"
    assert registers <= 255


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_products_on_tensor_cores_and_16_byte_accesses(build, kernel, head_dim):
    body = entry(build[1], kernel, head_dim)
    assert re.search(r"wmma\.mma\.sync\.aligned\.row\.(row|col)\.m16n16k16\.f32\.bf16\.bf16\.f32", body)
    assert re.search(r"ld\.global\.nc\.v4\.f32", body), "tiles loaded 16 bytes at a time"
    assert re.search(r"st\.global(\.wb)?\.v4\.f32", body), "rows stored 16 bytes at a time"
    assert not re.search(r"\b(ld|st)\.local\b", body), "nothing in local memory"

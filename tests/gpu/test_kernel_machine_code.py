"""trident's own CUDA kernels (src/gpu/*.cu) as nvcc builds them for Hopper (sm_90), read without a
GPU: ptxas's resource report must show no spills and no stack frame for any kernel (a spilled
accumulator goes to local memory, many times slower), and the PTX must show what each kernel is
written to do: its products on the tensor cores (wmma.mma.sync bf16 -> fp32) and its tiles loaded
and its rows stored 16 bytes at a time; in version 2 of the kernels, a thread's loads of a tile
issued one after another with no branch between (so their latencies overlap) and forward's
probabilities written to shared memory 16 bytes at a time; in version 3 (flash_attention_mma.cuh),
products as PTX's mma.sync m16n8k16 on operands that ldmatrix reads (transposed for the products
with a tile down its columns), and no WMMA, whose fragments went through shared memory. The fused norm
backward (norm_backward.cu), every instantiation: no spills, rows read and written 16 bytes at a time,
and its weight-gradient sums in registers (one atomic a block: the count of blocks done). Cross-entropy
(cross_entropy.cu): no spills, the logits read and the gradient written 16 bytes at a time."""
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
VERSIONS = [1, 2]
# Version 2's loads a thread issues together: all of a tile's up to HD 64, then batches of 6 and 4.
LOAD_BATCH = {16: 2, 32: 4, 64: 8, 96: 6, 128: 4}


@pytest.fixture(scope="module")
def build():
    """ptxas's report per kernel entry and the PTX text per kernel entry, over every .cu file of src/gpu
    (forward's kernels and backward's are in files of their own). A kernel built in two files would be
    two entries (its name carries its file's anonymous namespace), which entry() rejects."""
    sources = sorted((SOURCE_DIR / "src/gpu").glob("*.cu"))
    assert sources, f"no CUDA sources in {SOURCE_DIR / 'src/gpu'}"
    resources, ptx = {}, {}
    for source in sources:
        with tempfile.TemporaryDirectory() as keep:
            result = subprocess.run(
                [NVCC, "-arch=sm_90", "-O3", "-std=c++17", f"-I{SOURCE_DIR / 'src'}", "-cubin", "-Xptxas", "-v",
                 "--keep", "--keep-dir", keep, "-o", str(Path(keep) / f"{source.stem}.cubin"), str(source)],
                capture_output=True, text=True, check=True)
            add_entries(resources, resources_by_entry(result.stderr), source)
            add_entries(ptx, ptx_by_entry(next(Path(keep).glob("*.ptx")).read_text()), source)
    return resources, ptx


def add_entries(table, entries, source):
    """table += entries, none of them already there."""
    assert not table.keys() & entries.keys(), f"{source.name} repeats {sorted(table.keys() & entries.keys())}"
    table.update(entries)


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


def entry(table, kernel, head_dim, version):
    """Versions 1 and 2 are kernel<HD, V>; version 3 is kernel_mma<HD>."""
    mangled = f"{kernel}_mmaILi{head_dim}EE" if version == 3 else f"{kernel}ILi{head_dim}ELi{version}E"
    names = [name for name in table if mangled in name]
    assert len(names) == 1, f"{kernel}<{head_dim}, {version}> among {sorted(table)}"
    return table[names[0]]


@pytest.mark.parametrize("version", VERSIONS + [3])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_no_spills_and_no_stack(build, kernel, head_dim, version):
    stack, stores, loads, registers = entry(build[0], kernel, head_dim, version)
    assert (stack, stores, loads) == (0, 0, 0), f"{kernel}<{head_dim}, {version}>: {registers} registers"
    assert registers <= 255


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_products_on_tensor_cores_and_16_byte_accesses(build, kernel, head_dim, version):
    body = entry(build[1], kernel, head_dim, version)
    assert re.search(r"wmma\.mma\.sync\.aligned\.row\.(row|col)\.m16n16k16\.f32\.bf16\.bf16\.f32", body)
    assert re.search(r"ld\.global\.nc\.v4\.f32", body), "tiles loaded 16 bytes at a time"
    assert re.search(r"st\.global(\.wb)?\.v4\.f32", body), "rows stored 16 bytes at a time"
    assert not re.search(r"\b(ld|st)\.local\b", body), "nothing in local memory"


def longest_run_of_loads(body):
    """The most 16-byte global loads in a row with no label or branch between them."""
    lines = body.splitlines()
    at = [i for i, line in enumerate(lines) if "ld.global.nc.v4.f32" in line]
    longest = run = 1 if at else 0
    for first, second in zip(at, at[1:]):
        between = lines[first + 1:second]
        run = 1 if any(line.startswith("$L__") or re.search(r"\bbra\b", line) for line in between) else run + 1
        longest = max(longest, run)
    return longest


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_version_2_issues_a_tiles_loads_together(build, kernel, head_dim):
    assert longest_run_of_loads(entry(build[1], kernel, head_dim, 2)) >= LOAD_BATCH[head_dim]
    assert longest_run_of_loads(entry(build[1], kernel, head_dim, 1)) < LOAD_BATCH[head_dim]  # one at a time


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_version_2_writes_probabilities_16_bytes_at_a_time(build, head_dim):
    assert re.search(r"st\.shared\.v4\.(b32|u32)", entry(build[1], "flash_forward", head_dim, 2))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_version_3_multiplies_in_registers_from_ldmatrix_operands(build, kernel, head_dim):
    body = entry(build[1], kernel, head_dim, 3)
    assert re.search(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32", body)
    assert "wmma" not in body, "no WMMA fragment goes through shared memory"
    assert re.search(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", body), "scores' operands by ldmatrix"
    assert re.search(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16", body), "P·V's, dS·K's by ldmatrix.trans"
    assert re.search(r"ld\.global\.nc\.v4\.f32", body), "tiles loaded 16 bytes at a time"
    assert re.search(r"st\.global(\.wb)?\.v4\.f32", body), "rows stored 16 bytes at a time"
    assert not re.search(r"\b(ld|st)\.local\b", body), "nothing in local memory"


# norm_backward_rows<centred, chunks>: LayerNorm (centred) up to 8 chunks of 128 columns, RMSNorm to 16.
NORM_INSTANCES = [(True, c) for c in (2, 4, 6, 8)] + [(False, c) for c in (2, 4, 6, 8, 12, 16)]


def norm_entry(table, centred, chunks):
    mangled = f"norm_backward_rowsILb{int(centred)}ELi{chunks}EE"
    names = [name for name in table if mangled in name]
    assert len(names) == 1, f"norm_backward_rows<{centred}, {chunks}> among {sorted(table)}"
    return table[names[0]]


@pytest.mark.parametrize("centred,chunks", NORM_INSTANCES)
def test_norm_backward_keeps_its_sums_in_registers(build, centred, chunks):
    stack, stores, loads, registers = norm_entry(build[0], centred, chunks)
    assert (stack, stores, loads) == (0, 0, 0), f"norm_backward_rows<{centred}, {chunks}>: {registers} registers"
    assert registers <= (128 if chunks <= 12 else 255)  # two blocks a multiprocessor up to 12 chunks
    body = norm_entry(build[1], centred, chunks)
    assert re.search(r"ld\.global\.nc\.v4\.f32", body), "dout, x and the weight read 16 bytes at a time"
    assert re.search(r"ld\.global\.v4\.f32", body), "dx read 16 bytes at a time"
    assert re.search(r"st\.global(\.wb)?\.v4\.f32", body), "dx written 16 bytes at a time"
    assert not re.search(r"\b(ld|st)\.local\b", body), "nothing in local memory"
    assert len(re.findall(r"\batom\.", body)) == 1, "one atomic: the count of blocks done"


def test_cross_entropy_reads_and_writes_16_bytes_at_a_time(build):
    names = [name for name in build[0] if "cross_entropy_rows" in name]
    assert len(names) == 1, sorted(build[0])
    stack, stores, loads, registers = build[0][names[0]]
    assert (stack, stores, loads) == (0, 0, 0), f"cross_entropy_rows: {registers} registers"
    body = build[1][names[0]]
    assert re.search(r"ld\.global\.nc\.v4\.f32", body), "the first pass reads 16 bytes at a time"
    assert re.search(r"st\.global(\.wb)?\.v4\.f32", body), "the gradient written 16 bytes at a time"
    assert not re.search(r"\b(ld|st)\.local\b", body), "nothing in local memory"

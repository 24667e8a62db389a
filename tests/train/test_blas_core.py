"""OpenBLAS's kernels: where OpenBLAS falls back below what the CPU's flags allow and the user chose
no core, trident restarts itself on the best core the flags allow and says so (kernels/blas_core.hpp).
OpenBLAS does not fall back on the machines the tests run on, so the tests make it look as if it had:
OPENBLAS_CORETYPE=Prescott with TRIDENT_TEST_BLAS_CORE_AS_IF_CHOSEN=1 is taken as OpenBLAS's own choice."""
import os
import subprocess
from pathlib import Path

import h5py
import pytest

from conftest import _exe, run_trident

# OpenBLAS 0.3.21's x86-64 cores by the flags their kernels need (its driver/others/dynamic.c), best first.
CORES = [
    ("Cooperlake", {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16"}),
    ("SkylakeX", {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}),
    ("Haswell", {"avx2", "fma"}),
    ("Sandybridge", {"avx"}),
    ("Nehalem", {"sse4_2"}),
    ("Core2", {"ssse3"}),
]


def cpu():
    text = Path("/proc/cpuinfo").read_text()
    flags = set(next(line for line in text.splitlines() if line.startswith("flags")).split(":", 1)[1].split())
    return flags, "AuthenticAMD" in text


def expected_core():
    """The core the flags allow, or None where Prescott is already the best (nothing to choose)."""
    flags, amd = cpu()
    for core, needs in CORES:
        if needs <= flags:
            return "Zen" if core == "Haswell" and amd else core
    return None


def as_if_openblas_fell_back():
    return dict(os.environ, OPENBLAS_CORETYPE="Prescott", TRIDENT_TEST_BLAS_CORE_AS_IF_CHOSEN="1")


def version(env):
    proc = subprocess.run([_exe(), "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def better():
    core = expected_core()
    if os.uname().machine != "x86_64" or core is None:
        pytest.skip("OpenBLAS's x86-64 cores above Prescott need SSSE3 or more on an x86-64 CPU")
    return core


def test_a_fallback_is_replaced_by_the_best_core_the_flags_allow_and_said(better):
    out = version(as_if_openblas_fell_back())
    assert f"| core {better} (OpenBLAS chose Prescott on this CPU; trident chose {better} from its flags)" in out, out


def test_a_core_the_user_chose_is_kept():
    out = version(dict(os.environ, OPENBLAS_CORETYPE="Prescott"))
    assert "| core Prescott\n" in out and "trident chose" not in out, out


def test_a_run_under_mpirun_restarts_and_the_timeline_records_why(tmp_path, better):
    run_trident(tmp_path / "run", "train.steps=1", "parallel.dp=2", ranks=2, env=as_if_openblas_fell_back())
    with h5py.File(tmp_path / "run" / "timeline.h5", "r") as f:
        core, note = (f.attrs[key] for key in ("blas_core", "blas_core_note"))
        core, note = (v.decode() if isinstance(v, bytes) else str(v) for v in (core, note))
    assert core == better and note == f"OpenBLAS chose Prescott on this CPU; trident chose {better} from its flags"

"""data.shuffle and [eval] across grids, across a resume, and against PyTorch.

- A shuffled run (several epochs over a short synthetic stream) gives the one-rank losses on every
  grid and schedule, and its validation loss (after steps 2 and 4 only) equals the one-rank value
  to 1e-5; shuffling changes the losses, so it is on.
- Resuming a shuffled run from its step-2 checkpoint (the epoch turns in step 2) gives bitwise the
  losses and validation loss of the uninterrupted run.
- The validation loss of a Llama run on a held-out text file equals a float64 PyTorch Llama
  (tests/llama_reference.py) on the checkpoint's weights over the first eval.batches · G windows
  of that file, cut here as DESIGN.md "Token data" says.
"""
import h5py
import numpy as np
import pytest

from conftest import REPO, read_steps

T, MBS, M = 16, 2, 2
WINDOWS = 6  # fewer than the 8 sequences of two steps: every step after the first turns an epoch
SHUFFLED = ("model.layers=4", "model.d_model=32", "model.heads=4", f"model.seq_len={T}", "model.vocab=64",
            f"schedule.micro_batch_size={MBS}", f"schedule.microbatches={M}", "train.steps=4",
            f"data.synthetic_tokens={WINDOWS * T + 1}", "data.shuffle=true", "eval.every=2", "eval.batches=2",
            "output.log_every=1")
GRIDS = {
    "tp2": (2, ("parallel.tp=2",)),
    "pp2-1f1b": (2, ("parallel.pp=2",)),
    "dp2-zero1": (2, ("parallel.dp=2", "schedule.microbatches=1", "parallel.zero=1")),
    "pp2-interleaved": (2, ("parallel.pp=2", "schedule.kind=interleaved-1f1b", "schedule.virtual_stages=2")),
    "pp2-zb-h1": (2, ("parallel.pp=2", "schedule.kind=zb-h1")),
}


def assert_val_loss_after_steps_2_and_4(steps):
    val = steps["val_loss"]
    assert np.isnan(val[[0, 2]]).all() and np.isfinite(val[[1, 3]]).all(), val


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    from conftest import run_trident
    out = tmp_path_factory.mktemp("one_rank") / "run"
    run_trident(out, *SHUFFLED)
    return read_steps(out)


def test_shuffling_changes_the_order(one_rank, trident_run):
    _, run_dir = trident_run(*SHUFFLED, "data.shuffle=false")
    assert_val_loss_after_steps_2_and_4(one_rank)
    assert not np.array_equal(read_steps(run_dir)["loss"][1:], one_rank["loss"][1:])


@pytest.mark.parametrize("grid", GRIDS, ids=list(GRIDS))
def test_every_grid_trains_and_validates_as_one_rank(one_rank, trident_run, grid):
    ranks, overrides = GRIDS[grid]
    _, run_dir = trident_run(*SHUFFLED, *overrides, ranks=ranks)
    steps = read_steps(run_dir)
    assert_val_loss_after_steps_2_and_4(steps)
    np.testing.assert_allclose(steps["loss"], one_rank["loss"], rtol=1e-5)
    np.testing.assert_allclose(steps["val_loss"][[1, 3]], one_rank["val_loss"][[1, 3]], rtol=1e-5)


def test_resumed_shuffled_run_is_bitwise_the_uninterrupted_one(one_rank, trident_run, tmp_path):
    _, full = trident_run(*SHUFFLED, "checkpoint.every=2")
    checkpoint = full / "checkpoints" / "step_00000002.h5"
    with h5py.File(checkpoint, "r") as f:
        assert (f.attrs["data_windows"], f.attrs["data_shuffle"], f.attrs["data_epoch"]) == (WINDOWS, 1, 1)
    proc, resumed = trident_run(*SHUFFLED, f"checkpoint.resume={checkpoint}")
    assert "warning" not in proc.stdout, proc.stdout
    first, second = read_steps(full), read_steps(resumed)
    np.testing.assert_array_equal(second["step"], [3, 4])
    np.testing.assert_array_equal(second["loss"], first["loss"][2:])
    np.testing.assert_array_equal(second["val_loss"][1], first["val_loss"][3])


def test_val_loss_is_pytorchs_loss_on_the_held_out_windows(trident_run, tmp_path):
    import torch  # python3-torch: scripts/setup --tests installs it
    from llama_reference import causal_lm_loss

    rng = np.random.default_rng(3)
    train, held_out = tmp_path / "train.txt", tmp_path / "val.txt"
    train.write_bytes(rng.integers(0, 256, size=3000, dtype=np.uint8).tobytes())
    val_tokens = rng.integers(0, 256, size=1000, dtype=np.uint8)
    held_out.write_bytes(val_tokens.tobytes())
    llama = ("model.layers=2", "model.d_model=32", "model.heads=4", "model.kv_heads=2", "model.ffn_hidden=48",
             f"model.seq_len={T}", f"schedule.micro_batch_size={MBS}", f"schedule.microbatches={M}",
             "train.steps=2", "data.kind=text", f"data.path={train}", f"eval.path={held_out}", "eval.batches=3")
    _, run_dir = trident_run(*llama, "parallel.tp=2", "parallel.pp=2", ranks=4, deck=REPO / "input_decks" / "llama-tiny.toml")
    with h5py.File(run_dir / "checkpoints" / "step_00000002.h5", "r") as f:
        params = {}
        f["model"].visititems(lambda name, item: params.__setitem__(name.replace("/", "."), torch.from_numpy(
            np.asarray(item, dtype=np.float64))) if isinstance(item, h5py.Dataset) else None)
    windows = 3 * MBS * M  # the first eval.batches · G windows, in order
    inputs = np.stack([val_tokens[w * T:w * T + T] for w in range(windows)]).astype(np.int64)
    targets = np.stack([val_tokens[w * T + 1:w * T + T + 1] for w in range(windows)]).astype(np.int64)
    cfg = {"layers": 2, "heads": 4, "kv_heads": 2, "norm_eps": 1e-5, "rope_theta": 10000.0}
    with torch.no_grad():
        reference = causal_lm_loss(torch.from_numpy(inputs), torch.from_numpy(targets), params, cfg).item()
    logged = read_steps(run_dir)["val_loss"]
    assert np.isnan(logged[0]) and abs(logged[1] - reference) < 1e-5 * reference, (logged, reference)

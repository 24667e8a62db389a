"""End-to-end training on one rank, judged from timeline.h5 (never from printed text)."""
import h5py
import numpy as np

from conftest import ONE_RANK, TINY, read_steps


def test_synthetic_loss_falls_30_percent_in_200_steps(trident_run):
    _, run_dir = trident_run("train.steps=200")
    steps = read_steps(run_dir)
    assert list(steps["step"]) == list(range(1, 201))
    loss = steps["loss"]
    assert np.all(np.isfinite(loss))
    first, last = loss[0], loss[-5:].mean()
    assert last <= 0.7 * first, f"loss {first:.4f} -> {last:.4f}: fell by less than 30%"


def test_same_seed_gives_bitwise_identical_losses(trident_run):
    _, a = trident_run("train.steps=15", "train.seed=7")
    _, b = trident_run("train.steps=15", "train.seed=7")
    _, c = trident_run("train.steps=15", "train.seed=8")
    loss_a, loss_b, loss_c = (read_steps(d)["loss"] for d in (a, b, c))
    assert loss_a.tobytes() == loss_b.tobytes()
    assert not np.array_equal(loss_a, loss_c), "another seed must give other losses"


def test_steps_table_and_run_directory(trident_run):
    proc, run_dir = trident_run("train.steps=3", "output.log_every=1")
    steps = read_steps(run_dir)
    for column in ("step", "loss", "lr", "grad_norm", "step_time_s", "tokens_per_s", "peak_activation_bytes"):
        assert len(steps[column]) == 3, column
    assert np.all(steps["step_time_s"] > 0)
    assert np.all(steps["peak_activation_bytes"] > 0)
    overrides = (f"output.dir={run_dir}",) + ONE_RANK + ("train.steps=3", "output.log_every=1")
    expected = TINY.read_text().rstrip("\n") + "\n" + "".join(f"# --set {o}\n" for o in overrides)
    assert (run_dir / "deck.toml").read_text() == expected, "the copy is the deck, then every --set in order"
    assert "step 3/3" in proc.stdout


def test_world_size_mismatch_exits_2_on_every_rank_with_one_message(trident_run):
    proc, _ = trident_run("train.steps=1", ranks=2, expect=2)
    assert proc.stderr.count("trident: error:") == 1, proc.stderr
    assert "parallel.tp" in proc.stderr and "2 ranks" in proc.stderr


def test_reduced_matmul_precisions_follow_fp32_and_are_recorded(trident_run):
    """train.precision rounds every product's inputs (emulated on the CPU): the losses stay close to
    fp32's, differ from them (the rounding happens), and the timeline records the precision."""
    runs = {p: trident_run("train.steps=8", f"train.precision={p}")[1] for p in ("fp32", "tf32", "bf16")}
    losses = {p: read_steps(d)["loss"] for p, d in runs.items()}
    # Relative to fp32 over 8 AdamW steps of the tiny model, where TF32 (11 significant bits) moved
    # the losses by 2.4e-6 and bf16 (8 bits) by 5.4e-6 when this test was written.
    for precision, bound in (("tf32", 1e-4), ("bf16", 1e-3)):
        deviation = np.abs(losses[precision] / losses["fp32"] - 1.0)
        assert np.all(deviation <= bound), f"{precision}: {deviation.tolist()} exceed {bound}"
        assert np.any(deviation > 0), f"{precision} gave fp32's losses bit for bit: nothing was rounded"
    for precision, run_dir in runs.items():
        with h5py.File(run_dir / "timeline.h5", "r") as f:
            recorded = f.attrs["matmul_precision"]
            assert (recorded.decode() if isinstance(recorded, bytes) else str(recorded)) == precision

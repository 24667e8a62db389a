"""Comparing two training runs: the same losses, grad norms and final weights up to float reassociation."""
import h5py
import numpy as np


def latest_checkpoint_group(run_dir, group):
    """Every dataset under `group` ("model", "optimizer") of the run's latest checkpoint, by path."""
    with open(run_dir / "checkpoints" / "latest") as f:
        name = f.read().strip()
    tensors = {}
    with h5py.File(run_dir / "checkpoints" / name, "r") as f:
        f[group].visititems(lambda key, obj: tensors.__setitem__(key, np.asarray(obj))
                            if isinstance(obj, h5py.Dataset) else None)
    return tensors


def final_weights(run_dir):
    return latest_checkpoint_group(run_dir, "model")


def key_bias_block(key, ref):
    """The k third of c_attn's bias: adding a constant to every key leaves each softmax unchanged,
    so its gradient is zero in exact arithmetic and only rounding noise reaches AdamW, which
    normalises that noise into steps of up to lr. Its values are noise on every grid, bounded by
    the sum of the learning rates; the q and v thirds are compared like any weight."""
    if not key.endswith("attn/c_attn/bias"):
        return None
    third = ref.shape[0] // 3
    return slice(third, 2 * third)


def assert_same_training(reference, other, label, weight_rtol=1e-5, loss_rtol=1e-5, grad_norm_rtol=1e-4):
    """Losses to `loss_rtol` and grad norms to `grad_norm_rtol` relative; every final weight tensor
    to `weight_rtol` in relative L2 (the k third of c_attn's bias, whose gradient is zero, only
    within AdamW's reach: key_bias_block)."""
    (ref_steps, ref_weights), (steps, weights) = reference, other
    np.testing.assert_allclose(steps["loss"], ref_steps["loss"], rtol=loss_rtol, err_msg=f"{label}: losses")
    np.testing.assert_allclose(steps["grad_norm"], ref_steps["grad_norm"], rtol=grad_norm_rtol,
                               err_msg=f"{label}: grad norms")
    assert weights.keys() == ref_weights.keys(), label
    lr_sum = ref_steps["lr"].sum()
    for key, ref in ref_weights.items():
        got = weights[key].copy()
        noise = key_bias_block(key, ref)
        if noise is not None:
            assert np.abs(got[noise] - ref[noise]).max() <= 2 * lr_sum, f"{label}: {key} k-bias beyond AdamW's reach"
            got[noise] = ref[noise]
        # Relative error of the tensor as a whole: AdamW divides each gradient by its own running
        # magnitude, so elements with tiny gradients carry more of the reassociation noise.
        err = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
        assert err <= weight_rtol, f"{label}: {key} differs by {err:.2e} (relative L2, bound {weight_rtol:.0e})"

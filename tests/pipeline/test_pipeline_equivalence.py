"""Issue 4's promise: every pipeline schedule, on any stage partition and combined with tensor and
data parallelism, trains the same model as one rank on the same global batch (losses to 1e-5
relative, grad norms to 1e-4 and every final weight tensor to 1e-5 in relative L2, 2.5e-5 with tp or
dp > 1: equivalence.assert_same_training), and holds the activations its theory says.

An 8-layer, narrow variant of the tiny deck keeps each run to a second or two; the global batch is
m x dp micro-batches of one sequence, so the single-rank reference runs m x dp micro-batches.

The sanitizer build (TRIDENT_SANITIZED=1) runs every schedule, partition and grid feature once
rather than the whole matrix: AddressSanitizer looks for memory errors along the code paths, which
the release build's full matrix has already shown to compute the right numbers.
"""
import os
import re
import subprocess

import h5py
import numpy as np
import pytest

from conftest import ONE_RANK, TINY, _exe, read_steps, run_trident
from equivalence import assert_same_training, final_weights

SMALL = ("model.layers=8", "model.d_model=32", "model.heads=4", "model.seq_len=32", "train.steps=3",
         "schedule.micro_batch_size=1", "train.warmup_steps=1", "train.lr=1e-3", "train.min_lr=1e-4",
         "checkpoint.every=0")

_references = {}
SANITIZED = os.environ.get("TRIDENT_SANITIZED") == "1"


def run(trident_run, *overrides, ranks=1):
    _, run_dir = trident_run(*SMALL, *overrides, ranks=ranks)
    return run_dir


def training(run_dir):
    return read_steps(run_dir), final_weights(run_dir)


def reference(trident_run, global_microbatches):
    if global_microbatches not in _references:
        _references[global_microbatches] = training(
            run(trident_run, f"schedule.microbatches={global_microbatches}"))
    return _references[global_microbatches]


def pipeline_overrides(kind, p, m, v=1, tp=1, dp=1, *extra):
    return (f"schedule.kind={kind}", f"parallel.pp={p}", f"schedule.microbatches={m}",
            f"schedule.virtual_stages={v}", f"parallel.tp={tp}", f"parallel.dp={dp}", *extra)


def interleaved_allows(p, m):
    return m % p == 0


def microbatch_counts(p):
    return sorted({1, p - 1, p, 2 * p + 1} - {0})


# Cases the sanitizer build leaves to the release build, reported as skipped.
RELEASE_ONLY = pytest.mark.skipif(SANITIZED, reason="release build only: the sanitizer build runs each "
                                                    "schedule, partition and grid feature once")


def case(*values, sanitized=False):
    return pytest.param(*values, marks=() if sanitized else RELEASE_ONLY)


# The ordered matching the release cases run: "ordered" (NCCL's order over MPI) on the CPU build;
# TRIDENT_TEST_P2P=nccl with the GPU build's trident runs them over NCCL (README, "GPU build").
ORDERED = os.environ.get("TRIDENT_TEST_P2P", "ordered")


def p2p_cases(*values, sanitized=False):
    """The release build runs every case with ordered messages (parallel.p2p = "ordered": NCCL's
    matching, by posting order alone), so a schedule whose messages paired up wrongly would hand a
    stage another micro-batch's data; the sanitizer build runs its cases with tagged messages (the
    default on a CPU, which every other multi-rank test runs too). Where the order passes
    schedule/message_order's check, both match every message alike."""
    if SANITIZED:
        return [pytest.param(*values, "mpi", marks=() if sanitized else RELEASE_ONLY)]
    return [pytest.param(*values, ORDERED)]


def in_sanitized_matrix(p, m):
    return p == 3 and m in (1, p, 2 * p + 1)


SINGLE_GRID = [c for kind in ("gpipe", "1f1b", "zb-h1") for p in (2, 3, 4) for m in microbatch_counts(p)
               for c in p2p_cases(kind, p, m, 1, sanitized=in_sanitized_matrix(p, m))]
SINGLE_GRID += [c for p in (2, 3, 4) for m in microbatch_counts(p)
                for c in p2p_cases("interleaved-1f1b", p, m, 2, sanitized=in_sanitized_matrix(p, m))]
SINGLE_GRID += [c for p in (2, 4) for m in (p, 2 * p + 1) for c in p2p_cases("auto", p, m, 2, sanitized=(p, m) == (4, 9))]
# The V-shape kinds: rank r holds virtual stages r and 2p - 1 - r (rank 0 the embedding and the head).
SINGLE_GRID += [c for p in (2, 3, 4) for m in microbatch_counts(p)
                for c in p2p_cases("zb-v", p, m, 2, sanitized=(p, m) == (3, 7))]
SINGLE_GRID += [c for p in (3, 4) for m in (1, p) for c in p2p_cases("v-half", p, m, 2, sanitized=(p, m) == (4, 4))]
SINGLE_GRID += [c for p in (2, 3, 4) for m in (2 * p, 2 * p + 1)
                for c in p2p_cases("dualpipev", p, m, 2, sanitized=(p, m) == (3, 7))]

@pytest.mark.parametrize("kind,p,m,v,p2p", SINGLE_GRID)
def test_schedule_equals_single_rank(trident_run, kind, p, m, v, p2p):
    overrides = pipeline_overrides(kind, p, m, v, 1, 1, f"parallel.p2p={p2p}")
    if kind == "interleaved-1f1b" and not interleaved_allows(p, m):
        proc, _ = trident_run(*SMALL, *overrides, ranks=p, expect=2)
        assert proc.stderr.count("trident: error:") == 1, proc.stderr
        assert "interleaved-1f1b" in proc.stderr and "multiple" in proc.stderr, proc.stderr
        return
    run_dir = run(trident_run, *overrides, ranks=p)
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        recorded = f.attrs["p2p"]
        assert (recorded.decode() if isinstance(recorded, bytes) else str(recorded)) == p2p, recorded
    assert_same_training(reference(trident_run, m), training(run_dir), f"{kind} p={p} m={m} v={v} p2p={p2p}")


@pytest.mark.skipif(ORDERED == "nccl", reason="the GPU build has NCCL")
def test_nccl_messages_need_the_gpu_build(trident_run):
    """The CPU build has no NCCL: parallel.p2p = "nccl" exits 2 before any compute, naming the key and
    the CPU's way to run the same order ("ordered")."""
    proc, _ = trident_run(*SMALL, *pipeline_overrides("1f1b", 2, 2), "parallel.p2p=nccl", ranks=2, expect=2)
    assert proc.stderr.count("trident: error:") == 1, proc.stderr
    assert 'parallel.p2p = "nccl" needs the GPU build' in proc.stderr and '"ordered"' in proc.stderr, proc.stderr


# Pipelines inside a 3D grid, uneven and balanced partitions, recomputation, ZeRO-1.
GRID_CASES = [c for values in (
    p2p_cases("1f1b", 2, 3, 1, 2, 2, (), sanitized=True),
    p2p_cases("zb-h1", 2, 4, 1, 2, 2, ()),
    p2p_cases("interleaved-1f1b", 2, 4, 2, 2, 1, (), sanitized=True),
    p2p_cases("gpipe", 4, 4, 1, 2, 1, ()),
    p2p_cases("1f1b", 4, 9, 1, 1, 2, ()),
    p2p_cases("1f1b", 3, 5, 1, 2, 1, ()),
    p2p_cases("zb-h1", 3, 3, 1, 2, 1, ()),
    p2p_cases("1f1b", 2, 4, 1, 2, 2, ("parallel.zero=1",)),
    p2p_cases("1f1b", 3, 4, 1, 1, 1, ("parallel.stage_layers=[4,1,3]",), sanitized=True),
    p2p_cases("zb-h1", 4, 5, 1, 1, 1, ("parallel.stage_layers=[1,3,2,2]",)),
    p2p_cases("interleaved-1f1b", 3, 3, 2, 1, 1, ("parallel.stage_layers=[2,1,1,2,1,1]",), sanitized=True),
    p2p_cases("1f1b", 3, 4, 1, 1, 1, ('parallel.stage_layers="balanced"',), sanitized=True),
    p2p_cases("1f1b", 2, 4, 1, 1, 1, ('schedule.recompute="full"',)),
    p2p_cases("zb-h1", 2, 3, 1, 2, 1, ('schedule.recompute="full"',), sanitized=True),
    p2p_cases("interleaved-1f1b", 2, 2, 2, 1, 2, ('schedule.recompute="full"',), sanitized=True),
    p2p_cases("zb-h1", 2, 4, 1, 2, 1, ('schedule.recompute="selective"',), sanitized=True),
    p2p_cases("zb-v", 2, 4, 2, 2, 2, ()),
    p2p_cases("zb-v", 3, 4, 2, 1, 1, ("parallel.stage_layers=[2,1,1,1,2,1]",), sanitized=True),
    p2p_cases("zb-v", 2, 3, 2, 1, 2, ('schedule.recompute="full"', "parallel.zero=1")),
    p2p_cases("v-half", 3, 5, 2, 2, 1, ("schedule.activation_budget=0.75",)),
    p2p_cases("dualpipev", 2, 5, 2, 2, 2, ()),
) for c in values]


@pytest.mark.parametrize("kind,p,m,v,tp,dp,extra,p2p", GRID_CASES)
def test_pipeline_in_a_grid_equals_single_rank(trident_run, kind, p, m, v, tp, dp, extra, p2p):
    """Against one rank: the same losses, and every weight tensor to 1e-5, or with tp or dp > 1 to
    2.5e-5. TP and DP sum in another order than one rank does, and AdamW amplifies that noise in
    near-zero gradients: the most any tensor of these cases moved is 1.9e-5 (the q and v bias of
    c_attn at tp = 2, dp = 2). Against the same tp x dp grid without a pipeline, 1e-5 again."""
    label = f"{kind} p={p} m={m} v={v} tp={tp} dp={dp} {extra} p2p={p2p}"
    got = training(run(trident_run, *pipeline_overrides(kind, p, m, v, tp, dp, *extra, f"parallel.p2p={p2p}"),
                       ranks=p * tp * dp))
    if tp == 1 and dp == 1:
        assert_same_training(reference(trident_run, m * dp), got, label)
        return
    assert_same_training(reference(trident_run, m * dp), got, label, weight_rtol=2.5e-5)
    same_grid = training(run(trident_run, *pipeline_overrides("1f1b", 1, m, 1, tp, dp, *extra), ranks=tp * dp))
    assert_same_training(same_grid, got, label + " vs pp=1")


def peak_in_flight_per_stage(run_dir, step=1):
    """From /events: per pipeline stage, the most micro-batches between the start of their F and the
    end of their B (or W), replaying one rank's actions in order."""
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        e = f["events"]
        kinds = np.char.decode(np.asarray(e["kind"]), "ascii")
        rank, pp, steps = (np.asarray(e[c]) for c in ("rank", "pp", "step"))
        t_start = np.asarray(e["t_start"])
    peaks = {}
    for r in np.unique(rank):
        mask = (rank == r) & (steps == step)
        order = np.argsort(t_start[mask], kind="stable")
        in_flight = peak = 0
        for kind in kinds[mask][order]:
            in_flight += {"F": 1, "B": -1, "W": -1}.get(kind, 0)
            peak = max(peak, in_flight)
        stage = int(pp[mask][0])
        peaks[stage] = max(peaks.get(stage, 0), peak)
    return peaks


@pytest.mark.parametrize("kind,p,m", [case("1f1b", 4, 6, sanitized=True), case("1f1b", 3, 2),
                                      case("gpipe", 4, 6, sanitized=True), case("gpipe", 2, 3)])
def test_peak_in_flight_matches_theory(trident_run, kind, p, m):
    run_dir = run(trident_run, *pipeline_overrides(kind, p, m), ranks=p)
    expected = {s: (min(p - s, m) if kind == "1f1b" else m) for s in range(p)}
    assert peak_in_flight_per_stage(run_dir) == expected


@pytest.mark.parametrize("p,m", [case(4, 4, sanitized=True)])
def test_replanning_switches_schedule_and_trains_the_same(trident_run, p, m):
    """schedule.replan = "once": after step 2 the measured costs make zb-h1 the faster plan than the
    running 1f1b (3/7 of 1F1B's step idles at p = m = 4), step 3 runs it, the timeline records the
    switch, and the training is still the one-rank training."""
    run_dir = run(trident_run, *pipeline_overrides("1f1b", p, m), 'schedule.replan="once"', ranks=p)
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        replans, kind = str(f.attrs["replans"]), str(f.attrs["schedule_kind"])
    assert replans.startswith("after step 2, simulated with the measured costs: 1f1b (running)"), replans
    # The split of 2 layers per stage may move too, by the measured cost of the head.
    assert "; switching to zb-h1" in replans and kind == "zb-h1", replans
    assert_same_training(reference(trident_run, m), training(run_dir), "1f1b re-planned to zb-h1")


def simulated_decision(replans, kind, counts):
    """Whether step 2's re-planning line (the `replans` attribute) calls for moving the layers, read
    as DESIGN.md "Schedules are data" says it decides: of the running schedule and the candidates
    that fit the memory limit, the fastest, where it saves more than 5% of the running schedule's
    simulated step; the candidates on the kept split first, so that the balanced split must be
    strictly faster. The line must time the running schedule and the split balanced for the
    measured costs (which [5,1,1,1] and [1,7] are not). None where the times, printed to 4 digits,
    lie within 1e-3 of a threshold."""
    prefix = "after step 2, simulated with the measured costs: "
    assert replans.startswith(f"{prefix}{kind} (running) "), replans
    kept, found, balanced = replans[len(prefix):].partition(f"; layers {counts} moved to ")
    assert found, f"re-planning must time a split balanced for the measured costs: {replans}"
    timed = re.compile(r"([a-z0-9-]+)(?: \(running\))? ([0-9.e+-]+) s( \(over the memory limit\))?")

    def best(text):
        times = [float(seconds) for _, seconds, over in timed.findall(text) if not over]
        assert times, f"no candidate that fits in {text!r}: {replans}"
        return min(times)

    running = float(timed.match(kept).group(2))
    best_kept, best_balanced = best(kept), best(balanced.split("; ")[0].split(", ", 1)[1])
    bounds = (best_kept, 0.95 * running)
    if all(best_balanced < bound * (1 - 1e-3) for bound in bounds):
        return True
    if any(best_balanced >= bound * (1 + 1e-3) for bound in bounds):
        return False
    return None


@pytest.mark.parametrize("kind,p,m,layers", [case("1f1b", 2, 4, "[1,7]"), case("zb-v", 2, 4, "[5,1,1,1]", sanitized=True)])
def test_replanning_moves_layers_off_an_overloaded_stage_and_trains_the_same(trident_run, kind, p, m, layers):
    """A split that leaves one virtual stage most of the layers (and the last the head besides):
    after step 2 re-planning fits a layer's and the head's measured cost, moves layers to the
    balanced split through a checkpoint of step 2, and step 3 trains on it; the timeline records
    the new split, and the training is still the one-rank training.

    The decision follows measured times. Under AddressSanitizer the fixed cost of an action can
    outweigh the layers (a CI run measured it so with 1f1b [1,7], whose two stages cannot tell the
    two apart), so that moving them need not save the 5%: there the layers may stay. Both builds
    must re-plan, time the balanced split, take the decision its simulated times call for (and the
    timeline and the checkpoints must show that decision), and train as one rank; the release build
    must move the layers."""
    v = 2 if kind == "zb-v" else 1
    # Wider than SMALL, so that a layer's compute, not a fixed cost per action, sets a stage's time.
    wider = ("model.d_model=64", "model.seq_len=64", "schedule.micro_batch_size=2")
    run_dir = run(trident_run, *wider, *pipeline_overrides(kind, p, m, v), f"parallel.stage_layers={layers}",
                  'schedule.replan="once"', ranks=p)
    counts = layers.strip("[]").replace(",", "|")
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        replans, stage_layers = str(f.attrs["replans"]), str(f.attrs["stage_layers"])
        schedule_kind = str(f.attrs["schedule_kind"])
    moved = replans.endswith(" on the moved layers")
    must_move = simulated_decision(replans, kind, counts)
    assert must_move in (None, moved), f"the simulated times call for moving the layers: {must_move}\n{replans}"
    if not SANITIZED:
        assert moved, replans
    checkpoint = run_dir / "checkpoints" / "step_00000002.h5"
    if moved:
        assert f"; layers {counts} moved to {stage_layers}" in replans and stage_layers != counts, replans
        assert checkpoint.exists(), "the layers move through step 2's checkpoint"
    else:
        assert stage_layers == counts and not checkpoint.exists(), (replans, stage_layers)
    assert replans.endswith((f"; switching to {schedule_kind}", f"; switching to {schedule_kind} on the moved layers",
                             f"; keeping {schedule_kind}")), (replans, schedule_kind)
    one_rank = training(run(trident_run, *wider, f"schedule.microbatches={m}"))
    assert_same_training(one_rank, training(run_dir), f"{kind} {layers} re-planned")


def replans_and_stage_layers(run_dir):
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        return str(f.attrs.get("replans", "")), str(f.attrs["stage_layers"])


def compute_seconds_per_step(run_dir, world_rank):
    """{step: seconds} of `world_rank`'s F, B, I and W events, read from the timeline's events."""
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        e = f["events"]
        kind, rank, step = e["kind"].asstr()[:], e["rank"][:], e["step"][:]
        took = e["t_end"][:] - e["t_start"][:]
    mine = (rank == world_rank) & np.isin(kind, ["F", "B", "I", "W"])
    return {int(s): float(took[mine & (step == s)].sum()) for s in np.unique(step[mine])}


@pytest.mark.parametrize("m", [case(4, sanitized=True)])
def test_replanning_moves_layers_off_a_straggler_and_trains_the_same(trident_run, tmp_path, m):
    """Issue 41, item 4: world rank 0 (pp 0, dp 0) is eight times as slow as its dp peer
    (TRIDENT_TEST_SLOW_RANK, test-only; at four times a CI run measured 2.42x, its peers sharing the
    two cores with another test). After step 2 re-planning finds it from every rank's measured
    costs, moves layers off its stage through a checkpoint, the straggler computes less per step after
    it, the timeline says when and why, and the training is still the one-rank training."""
    wider = ("model.d_model=64", "model.seq_len=64", "schedule.micro_batch_size=2", "train.steps=7")
    slowed = dict(os.environ, TRIDENT_TEST_SLOW_RANK="0:8")
    out = tmp_path / "straggler"
    run_trident(out, *SMALL, *wider, *pipeline_overrides("1f1b", 2, m, dp=2), 'schedule.replan="once"', ranks=4,
                env=slowed)
    replans, stage_layers = replans_and_stage_layers(out)
    assert replans.startswith("after step 2, simulated with the measured costs: 1f1b (running)"), replans
    slowness = re.search(r"; stage 0's world rank 0 takes ([0-9.]+)x as long as its peers", replans)
    assert slowness and float(slowness.group(1)) >= 2.5, replans  # 8x its actions; its peers share the cores
    assert "; layers 4|4 moved to " in replans and replans.endswith(" on the moved layers"), replans
    first, second = map(int, stage_layers.split("|"))
    assert first < second and first + second == 8, stage_layers
    if not SANITIZED:
        # The straggler's own compute (its actions and their sleeps), before the move and after it in
        # the same run: it follows its layers (4, then `first`). Not the step time: ctest runs another
        # test beside this one on the two cores, and a CI run measured no faster step; the step time
        # is asserted with emulated compute in test_emulated and measured in bench/pipeline.py.
        busy = compute_seconds_per_step(out, world_rank=0)
        before, after = np.median([busy[1], busy[2]]), np.median([busy[s] for s in range(3, 8)])
        assert after < 0.9 * before, f"world rank 0's compute per step: {before:.4f} s on 4 layers, {after:.4f} s after"
    one_rank = training(run(trident_run, *wider, f"schedule.microbatches={2 * m}"))
    assert_same_training(one_rank, training(out), "a straggler's layers moved", weight_rtol=2.5e-5)


def plan_csv(*overrides):
    """`trident plan DECK --show-schedule --csv` of the tiny deck with SMALL and `overrides`."""
    command = [_exe(), "plan", str(TINY), "--show-schedule", "--csv"]
    for o in ONE_RANK + SMALL + overrides:
        command += ["--set", o]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def actions_in_order(run_dir):
    """Each (rank, step)'s compute actions as the timeline records them, in the order they ran."""
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        e = f["events"]
        kind, rank, step = e["kind"].asstr()[:], e["rank"][:], e["step"][:]
        microbatch, chunk, start = e["microbatch"][:], e["chunk"][:], e["t_start"][:]
    order = {}
    for i in np.argsort(start, kind="stable"):
        if kind[i] in ("F", "B", "I", "W"):
            order.setdefault((int(rank[i]), int(step[i])), []).append((kind[i], int(microbatch[i]), int(chunk[i])))
    return order


@pytest.mark.parametrize("kind,p,m,v", [case("zb-v", 2, 4, 2, sanitized=True), case("interleaved-1f1b", 2, 4, 2),
                                        case("zb-h1", 3, 4, 1)])
def test_a_schedule_written_as_csv_runs_as_the_built_in(trident_run, tmp_path, kind, p, m, v):
    """Issue 37: `plan --show-schedule --csv` writes a built-in schedule in PyTorch's action-list
    layout, and schedule.kind = "file" runs that file as the built-in runs: the same losses bit for
    bit, and every rank's actions in the same order in the timeline."""
    overrides = pipeline_overrides(kind, p, m, v)
    rows = plan_csv(*overrides).splitlines()
    assert len(rows) == p and all(re.fullmatch(r"(\d+[FBIW]\d+)(,\d+[FBIW]\d+)*", row) for row in rows), rows
    schedule = tmp_path / "schedule.csv"
    schedule.write_text("\n".join(rows) + "\n")
    built_in = run(trident_run, *overrides, ranks=p)
    from_file = run(trident_run, *overrides, 'schedule.kind="file"', f'schedule.file="{schedule}"', ranks=p)
    assert read_steps(from_file)["loss"].tobytes() == read_steps(built_in)["loss"].tobytes()
    assert actions_in_order(from_file) == actions_in_order(built_in)
    with h5py.File(from_file / "timeline.h5", "r") as f:
        assert f.attrs["schedule_kind"] == "file"


@pytest.mark.parametrize("rows,named", [
    (["0F0,0F1,0B0,0X1", "1F0,1B0,1F1,1B1"], 'row 1, action "0X1"'),
    (["0F0,0B0,0F1,0B1", "1B0,1F0,1F1,1B1"], "deadlock: rank 0 is stuck at B0"),
    (["0F0,0F1,0B0", "1F0,1B0,1F1,1B1"], "rank 0 never runs the backward of F1"),
    (["0F0,1F1,0B0,0B1", "1F0,1B0,1F1,1B1"], 'row 1, action "1F1": stage 1 is not on rank 0'),
])
def test_a_faulty_schedule_file_exits_2_on_every_rank_naming_row_and_action(trident_run, tmp_path, rows, named):
    schedule = tmp_path / "schedule.csv"
    schedule.write_text("\n".join(rows) + "\n")
    proc, _ = trident_run(*SMALL, *pipeline_overrides("1f1b", 2, 2), 'schedule.kind="file"',
                          f'schedule.file="{schedule}"', ranks=2, expect=2)
    assert proc.stderr.count("trident: error:") == 1 and named in proc.stderr, proc.stderr
    assert str(schedule) in proc.stderr, proc.stderr

"""The timeline of real pipeline runs (DESIGN.md "Timeline"), read with h5py as the
post-processing tools read it: every rank's events arrive, a rank's events never overlap, each rank
runs exactly its schedule's actions, and the /steps values derived from the events agree with them.

Runs: the tiny deck on 2 stages (2 ranks) and on 4 stages of one layer each (4 ranks), with 1F1B and
ZB-H1, 3 steps; each run is made once and checked by every test below.
"""
import os
import signal
import subprocess
import time
import tomllib

import h5py
import numpy as np
import pytest

from conftest import TINY, TrainingJob, _exe, read_steps

STEPS = 3
# The micro-batches per step, from the deck the runs train (the runs leave schedule.microbatches alone).
with open(TINY, "rb") as deck:
    M = tomllib.load(deck)["schedule"]["microbatches"]
COMPUTE = ("F", "B", "I", "W")
EVENT_COLUMNS = {"rank": np.int32, "tp": np.int32, "pp": np.int32, "dp": np.int32, "step": np.int32,
                 "microbatch": np.int32, "chunk": np.int32, "t_start": np.float64, "t_end": np.float64,
                 "bytes": np.int64}

# (pipeline stages = ranks, extra overrides)
GRIDS = [(2, ()), (4, ("model.layers=4",))]
SCHEDULES = ("1f1b", "zb-h1")
CONFIGS = [pytest.param(kind, pp, extra, id=f"{kind}-pp{pp}") for pp, extra in GRIDS for kind in SCHEDULES]

_runs = {}


def run_dir(trident_run, kind, pp, extra):
    """The run of this configuration, made on first use and shared by the tests (a failed run
    fails every test of its configuration without running again)."""
    key = (kind, pp, extra)
    if key not in _runs:
        try:
            _, out = trident_run(f"parallel.pp={pp}", f"schedule.kind={kind}", f"train.steps={STEPS}",
                                 "checkpoint.every=0", *extra, ranks=pp)
            _runs[key] = out
        except AssertionError as failure:
            _runs[key] = failure
    if isinstance(_runs[key], AssertionError):
        pytest.fail(f"the {kind} run on {pp} stages failed (see the first test of this configuration):\n"
                    f"{str(_runs[key])[-2000:]}")
    return _runs[key]


def read_timeline(out):
    """Every /events column as a numpy array (kind decoded to str), and the root attributes."""
    with h5py.File(out / "timeline.h5", "r") as f:
        events = f["events"]
        columns = {}
        for name, dtype in EVENT_COLUMNS.items():
            assert events[name].dtype == dtype, name
            columns[name] = events[name][:]
        assert events["kind"].dtype == np.dtype("S24")
        columns["kind"] = events["kind"].asstr()[:].astype(str)
        attrs = dict(f.attrs)
    lengths = {name: len(values) for name, values in columns.items()}
    assert len(set(lengths.values())) == 1, lengths
    return columns, attrs


# The compute actions each pipeline rank runs per micro-batch, from the schedule's rule (independent
# of trident's generators): 1F1B and GPipe run F and B, ZB-H1 splits B into I (input gradient) and W
# (weight gradient).
ACTIONS_PER_MICROBATCH = {"1f1b": ("F", "B"), "gpipe": ("F", "B"), "zb-h1": ("F", "I", "W")}


def expected_actions(kind, m):
    """The (kind, micro-batch) pairs one pipeline rank runs in one step."""
    return sorted((k, mb) for k in ACTIONS_PER_MICROBATCH[kind] for mb in range(m))


@pytest.mark.parametrize("kind,pp,extra", CONFIGS)
def test_every_rank_reports_every_step(trident_run, kind, pp, extra):
    events, attrs = read_timeline(run_dir(trident_run, kind, pp, extra))
    world = pp
    assert set(events["rank"].tolist()) == set(range(world))
    for step in range(1, STEPS + 1):
        assert set(events["rank"][events["step"] == step].tolist()) == set(range(world)), step
    assert set(events["step"].tolist()) == set(range(1, STEPS + 1))
    # One grid coordinate per rank; the pipeline coordinates cover the stages.
    stage_of = {}
    for r in range(world):
        mine = events["rank"] == r
        for coord in ("tp", "pp", "dp"):
            assert len(np.unique(events[coord][mine])) == 1, (r, coord)
        assert events["tp"][mine][0] == 0 and events["dp"][mine][0] == 0, r
        stage_of[r] = int(events["pp"][mine][0])
    assert sorted(stage_of.values()) == list(range(pp))
    assert int(attrs["pp"]) == pp and attrs["schedule"] == kind


@pytest.mark.parametrize("kind,pp,extra", CONFIGS)
def test_events_of_a_rank_do_not_overlap(trident_run, kind, pp, extra):
    events, _ = read_timeline(run_dir(trident_run, kind, pp, extra))
    assert np.all(events["t_start"] < events["t_end"]), "every event has a positive duration"
    for r in range(pp):
        mine = events["rank"] == r
        order = np.argsort(events["t_start"][mine], kind="stable")
        t_start, t_end = events["t_start"][mine][order], events["t_end"][mine][order]
        kinds, steps = events["kind"][mine][order], events["step"][mine][order]
        overlap = np.flatnonzero(t_start[1:] < t_end[:-1] - 1e-9)
        assert overlap.size == 0, (
            f"rank {r}: {kinds[overlap[0]]} of step {steps[overlap[0]]} ends at {t_end[overlap[0]]!r}, after "
            f"{kinds[overlap[0] + 1]} of step {steps[overlap[0] + 1]} starts at {t_start[overlap[0] + 1]!r}")
        assert np.all(np.diff(steps) >= 0), f"rank {r}: the steps follow each other in time"


def check_schedule_actions(events, attrs, kind, pp):
    """The timeline's compute events against the counts the deck implies: each of the pp ranks runs,
    in each of the STEPS steps, every action of the schedule once per micro-batch (M of them), and
    nothing else."""
    assert int(attrs["m"]) == M, f"the timeline says m = {attrs['m']}, the deck {M}"
    counts = {k: int((events["kind"] == k).sum()) for k in COMPUTE}
    expected = {k: (pp * STEPS * M if k in ACTIONS_PER_MICROBATCH[kind] else 0) for k in COMPUTE}
    assert counts == expected, f"compute events in the timeline {counts}, from the deck {expected}"
    per_step = expected_actions(kind, M)
    compute = np.isin(events["kind"], COMPUTE)
    for r in range(pp):
        mine = compute & (events["rank"] == r)
        for step in range(1, STEPS + 1):
            sel = mine & (events["step"] == step)
            got = sorted(zip(events["kind"][sel].tolist(), events["microbatch"][sel].tolist()))
            assert got == per_step, (r, step, got)
            assert np.all(events["chunk"][sel] == 0), (r, step)


@pytest.mark.parametrize("kind,pp,extra", CONFIGS)
def test_each_rank_runs_its_schedule_actions(trident_run, kind, pp, extra):
    events, attrs = read_timeline(run_dir(trident_run, kind, pp, extra))
    check_schedule_actions(events, attrs, kind, pp)


@pytest.mark.parametrize("kind,pp,extra", CONFIGS)
def test_steps_and_measured_bubble(trident_run, kind, pp, extra):
    out = run_dir(trident_run, kind, pp, extra)
    steps = read_steps(out)
    events, _ = read_timeline(out)
    np.testing.assert_array_equal(steps["step"], np.arange(1, STEPS + 1))
    compute = np.isin(events["kind"], COMPUTE)
    for i, step in enumerate(range(1, STEPS + 1)):
        sel = compute & (events["step"] == step)
        t_start, t_end = events["t_start"][sel], events["t_end"][sel]
        busy = float(np.sum(t_end - t_start))
        span = float(t_end.max() - t_start.min())
        bubble = 1.0 - busy / (pp * span)
        assert 0.0 < bubble < 1.0, (step, bubble)
        assert abs(steps["bubble"][i] - bubble) <= 1e-9, (step, steps["bubble"][i], bubble)


@pytest.mark.parametrize("kind,pp,extra", CONFIGS)
def test_without_tensor_parallelism_no_time_goes_to_tp_collectives(trident_run, kind, pp, extra):
    steps = read_steps(run_dir(trident_run, kind, pp, extra))
    assert np.all(steps["tp_comm_s"] >= 0.0), steps["tp_comm_s"]
    assert np.all(steps["tp_comm_s"] < 1e-3), steps["tp_comm_s"]  # a group of one: no-op collectives


def test_tensor_parallel_collectives_are_timed(trident_run):
    """tp = 2: every step spends some of its time blocked in the TP collectives (per micro-batch and
    direction, two all-reduces per layer and one for the embedding or the head; the loss's
    all-gather; the gradient norm's sum), never more than the step."""
    _, out = trident_run("parallel.tp=2", f"train.steps={STEPS}", "checkpoint.every=0", ranks=2)
    steps = read_steps(out)
    assert np.all(steps["tp_comm_s"] > 0.0), steps["tp_comm_s"]
    assert np.all(steps["tp_comm_s"] < steps["step_time_s"]), (steps["tp_comm_s"], steps["step_time_s"])


def plan_cp_hops(*overrides):
    """The hops a CP rank of stage 0 sends per step, from `trident plan`'s context-parallel table."""
    sets = [a for o in overrides for a in ("--set", o)]
    text = subprocess.run([_exe(), "plan", str(TINY), *sets], capture_output=True, text=True,
                          check=True).stdout
    table = text.split("Context-parallel ring per step")[1].splitlines()
    row = next(line.split() for line in table if line.split()[:1] == ["0"])
    return int(row[1])


def test_context_parallel_ring_hops_are_timed(trident_run):
    """cp = 2: every F and B of every rank is followed by its RING_CP event (the hops of its layers'
    ring attention: bytes sent, per layer cp − 1 hops of k | v for F; for B cp − 1 hops of k | v and
    cp of their gradients, a whole turn back to their owner); cp_comm_s is within the step time;
    one rank records none."""
    grid = ("parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "parallel.cp=2")
    _, out = trident_run(*grid, f"train.steps={STEPS}", "checkpoint.every=0", ranks=2)
    events, attrs = read_timeline(out)
    assert int(attrs["cp"]) == 2
    steps = read_steps(out)
    assert np.all(steps["cp_comm_s"] >= 0.0) and np.all(steps["cp_comm_s"] < steps["step_time_s"]), steps["cp_comm_s"]
    config = tomllib.loads((out / "deck.toml").read_text())
    model, schedule = config["model"], config["schedule"]
    B, T, C = schedule["micro_batch_size"], model["seq_len"], model["d_model"]
    kv_bytes = B * T // 2 * 2 * C * 4  # a rank's two chunks of k | v (T / cp rows), fp32
    for rank in (0, 1):
        mine = events["rank"] == rank
        ring = mine & (events["kind"] == "RING_CP")
        actions = mine & np.isin(events["kind"], ("F", "B"))
        assert ring.sum() == actions.sum(), (rank, ring.sum(), actions.sum())
        sent = np.sort(np.unique(events["bytes"][ring]))
        assert list(sent) == [model["layers"] * kv_bytes, 3 * model["layers"] * kv_bytes], (rank, sent)
        # The plan's count of the step's hops (plan/cp_traffic.hpp) is what the timeline recorded.
        step_bytes = events["bytes"][ring & (events["step"] == STEPS)].sum()
        assert step_bytes == plan_cp_hops(*grid) * kv_bytes, (rank, step_bytes)
    _, alone = trident_run("parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "train.steps=1",
                           "checkpoint.every=0")
    events, _ = read_timeline(alone)
    assert "RING_CP" not in set(events["kind"])


def test_expert_parallel_all_to_alls_are_timed(trident_run):
    """ep = 2 ([model.moe]): every F and B of every rank is followed by its ALLTOALL_EP event (the
    bytes its mixtures sent: in F, each mixture layer's counts of rows per expert for the other rank,
    its rows out and the other rank's rows back; in B the same rows' gradients, no counts), so per
    action F's bytes exceed B's by the counts of every mixture layer; ep_comm_s is within the step
    time; without ep none are recorded."""
    moe = ("model.family=llama", "model.layers=2", "model.moe.experts=4", "model.moe.top_k=2",
           "model.moe.expert_ffn_hidden=32")
    grid_steps = (f"train.steps={STEPS}", "checkpoint.every=0", "parallel.tp=1", "parallel.pp=1")
    _, out = trident_run(*moe, *grid_steps, "parallel.dp=2", "parallel.ep=2", ranks=2)
    events, _ = read_timeline(out)
    steps = read_steps(out)
    assert np.all(steps["ep_comm_s"] >= 0.0) and np.all(steps["ep_comm_s"] < steps["step_time_s"]), steps["ep_comm_s"]
    counts_bytes = 2 * 2 * 4  # 2 mixture layers × E / ep = 2 counts × 4 bytes, to the one other rank
    for rank in (0, 1):
        mine = events["rank"] == rank
        all_to_all = np.flatnonzero(mine & (events["kind"] == "ALLTOALL_EP"))
        actions = np.flatnonzero(mine & np.isin(events["kind"], ("F", "B")))
        assert len(all_to_all) == len(actions), (rank, len(all_to_all), len(actions))
        # One pipeline stage: the actions and their exchanges go in the same order, F and B each by micro-batch.
        kinds = events["kind"][actions]
        sent = events["bytes"][all_to_all]
        assert np.all(sent > counts_bytes), sent
        forward, backward = sent[kinds == "F"], sent[kinds == "B"]
        np.testing.assert_array_equal(forward - backward, counts_bytes)
    _, without_ep = trident_run(*moe, *grid_steps, "parallel.dp=2", ranks=2)
    events, _ = read_timeline(without_ep)
    assert "ALLTOALL_EP" not in set(events["kind"])


def test_tp_comm_is_the_longest_wait_of_any_rank(tmp_path):
    """tp = 2 with rank 0 held back: the test stops it for 15 ms of every 20 once training runs,
    so rank 1 waits for it at every collective, about three quarters of each step (less where a
    loaded machine stretches the test's own sleeps: a CI run at 10 of 20 ms saw one step at 27%),
    while rank 0 hardly ever waits. tp_comm_s is the longest wait of any rank: rank 1's, not rank
    0's small one."""
    out = tmp_path / "held_back"
    with TrainingJob(out, "parallel.tp=2", "train.steps=6", "checkpoint.every=0", "model.d_model=256",
                     "model.seq_len=128", ranks=2) as job:
        rank0 = job.rank_once_training(0)
        while rank0 is not None and job.proc.poll() is None:
            try:
                os.kill(rank0, signal.SIGSTOP)
                time.sleep(0.015)
                os.kill(rank0, signal.SIGCONT)
            except ProcessLookupError:
                break
            time.sleep(0.005)
        job.proc.wait(timeout=300)
    assert job.proc.returncode == 0, f"{' '.join(job.cmd)} exited {job.proc.returncode}\n{job.output()}"
    steps = read_steps(out)
    share = steps["tp_comm_s"][1:] / steps["step_time_s"][1:]  # step 1 ran before the stops began
    assert np.all(share > 0.3), share


@pytest.mark.parametrize("kind,pp,extra", CONFIGS)
def test_peak_activation_per_stage(trident_run, kind, pp, extra):
    """/steps holds each stage's largest activation peak over its ranks
    (peak_activation_bytes_per_stage, one column per stage) and the largest of all
    (peak_activation_bytes)."""
    with h5py.File(run_dir(trident_run, kind, pp, extra) / "timeline.h5", "r") as f:
        per_stage = f["steps"]["peak_activation_bytes_per_stage"]
        assert per_stage.shape == (STEPS, pp)
        assert per_stage.dtype == np.int64
        peaks = per_stage[:]
        overall = f["steps"]["peak_activation_bytes"][:]
    assert np.all(peaks > 0), peaks
    np.testing.assert_array_equal(peaks.max(axis=1), overall)


def compute_order(events, step, rank):
    """Rank `rank`'s compute actions of `step` in time order, as "F0", "B1", ..."""
    mine = np.isin(events["kind"], COMPUTE) & (events["step"] == step) & (events["rank"] == rank)
    order = np.argsort(events["t_start"][mine], kind="stable")
    return [f"{k}{mb}" for k, mb in zip(events["kind"][mine][order], events["microbatch"][mine][order])]


def test_resume_replaces_the_rows_after_the_checkpoint(trident_run, tmp_path):
    """A resumed run continues the timeline and says so.

    A 1F1B run on 2 stages checkpoints at step 2 and ends at step 3; a GPipe run resumed from the
    step-2 checkpoint in the same directory goes to step 4. The timeline keeps the first run's rows
    of steps 1 and 2 bit for bit, and its steps 3 and 4 are the resumed run's: GPipe's order (every
    forward before any backward), where the first run's step 3 was 1F1B's (a backward before the
    last forward), and the root attributes name GPipe."""
    out = tmp_path / "resumed"
    common = ("parallel.pp=2", "checkpoint.every=2", f"output.dir={out}")
    trident_run(*common, "schedule.kind=1f1b", "train.steps=3", ranks=2)
    first_steps = read_steps(out)
    first_events, _ = read_timeline(out)
    checkpoint = out / "checkpoints" / "step_00000002.h5"
    assert checkpoint.exists()
    proc, _ = trident_run(*common, "schedule.kind=gpipe", "train.steps=4", f"checkpoint.resume={checkpoint}",
                          ranks=2)
    assert "timeline: continuing" in proc.stdout and "after step 2" in proc.stdout, proc.stdout

    steps = read_steps(out)
    events, attrs = read_timeline(out)
    np.testing.assert_array_equal(steps["step"], [1, 2, 3, 4])
    assert len({len(column) for column in steps.values()}) == 1, {k: len(v) for k, v in steps.items()}
    for name in ("loss", "lr", "step_time_s", "bubble"):
        np.testing.assert_array_equal(steps[name][:2], first_steps[name][:2], err_msg=name)
    assert attrs["schedule_kind"] == "gpipe" and "train.steps=4" in attrs["deck"], "the resumed run's attributes"

    first_kept = first_events["step"] <= 2
    kept = events["step"] <= 2
    for name in ("rank", "step", "kind", "microbatch", "t_start", "t_end"):
        np.testing.assert_array_equal(events[name][kept], first_events[name][first_kept], err_msg=name)
    m = int(attrs["m"])
    forwards, backwards = [f"F{mb}" for mb in range(m)], [f"B{mb}" for mb in range(m)]
    assert compute_order(first_events, 3, 0).index("B0") < compute_order(first_events, 3, 0).index(f"F{m - 1}")
    for step in (1, 2):
        assert compute_order(events, step, 0) == compute_order(first_events, step, 0), step
    for step in (3, 4):
        for r in range(2):
            order = compute_order(events, step, r)
            assert order[:m] == forwards and sorted(order[m:]) == sorted(backwards), (step, r, order)

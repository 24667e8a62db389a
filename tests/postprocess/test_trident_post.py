"""postprocess/trident-post against real trident runs: the tiny deck at p = 2 (real compute,
tp 1 x pp 2 x dp 2) and at p = 4 (emulated compute, 1F1B and ZB-H1, m = 8), made once per session
through mpirun. Every number the tools print is checked against values computed here,
independently, from the timeline's /events; the trace must hold every event with its duration;
the PNGs must have the pixel size asked for and draw what the timeline holds (read back pixel by
pixel); checkpoints must verify, and a flipped byte must not."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import matplotlib.image
import numpy as np
import pytest

from conftest import post, run_trident

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TOOL = REPO / "postprocess" / "trident-post"
sys.path.insert(0, str(HERE))
import synthetic_timeline  # noqa: E402

COMPUTE = ("F", "B", "I", "W")
COMMUNICATION = ("SEND", "RECV", "ALLREDUCE_TP", "ALLGATHER_TP", "REDUCE_SCATTER_TP", "RING_CP", "ALLREDUCE_DP",
                 "ALLREDUCE_EMB")
EMULATED = ("model.layers=8", "train.steps=3", "schedule.microbatches=8", "schedule.micro_batch_size=1",
            "emulate.enabled=true", "emulate.forward_ms=20", "emulate.backward_ms=40", "emulate.input_grad_ms=20",
            "emulate.weight_grad_ms=20", "parallel.pp=4")
RUNS = {
    # Context parallelism's ring: RING_CP events, and gradients reduced over its dp x cp ranks.
    "p2": (4, ("parallel.pp=2", "parallel.cp=2", "train.steps=4", "checkpoint.every=2", "eval.every=2",
               "eval.batches=1")),
    "p4-1f1b": (4, EMULATED + ("schedule.kind=1f1b",)),
    "p4-zb": (4, EMULATED + ("schedule.kind=zb-h1",)),
}


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """{name: run directory} for p2, p4-1f1b, p4-zb."""
    base = tmp_path_factory.mktemp("runs")
    for key, (ranks, overrides) in RUNS.items():
        run_trident(base / key, *overrides, ranks=ranks)
    return {key: base / key for key in RUNS}


@pytest.fixture(params=sorted(RUNS))
def run_dir(request, runs):
    return runs[request.param]


def read_run(run_dir):
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        events = {k: np.asarray(f["events"][k]) for k in f["events"]}
        steps = {k: np.asarray(f["steps"][k]) for k in f["steps"]}
        attrs = dict(f.attrs)
    events["kind"] = np.array([k.decode() for k in events["kind"]])
    return events, steps, attrs


def png_size(path):
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


# ---- help ---------------------------------------------------------------------------------------

def test_help_names_every_subcommand():
    out = post("--help").stdout
    for command in ("gantt", "bubble", "trace", "curves", "stragglers", "ckpt", "export", "import", "compare"):
        assert command in out
        assert "usage: trident-post " + command in post(command, "--help").stdout


# ---- bubble -------------------------------------------------------------------------------------

def independent_step(events, step, world):
    """Busy compute per rank, compute span and bubble of one step, straight from the rows."""
    busy = [0.0] * world
    comm = [0.0] * world
    first, last = float("inf"), float("-inf")
    for r, s, k, t0, t1 in zip(events["rank"], events["step"], events["kind"], events["t_start"], events["t_end"]):
        if s != step:
            continue
        if k in COMPUTE:
            busy[r] += t1 - t0
            first, last = min(first, t0), max(last, t1)
        elif k in COMMUNICATION:
            comm[r] += t1 - t0
    span = last - first
    return busy, comm, span, 1.0 - sum(busy) / (world * span)


def test_bubble_matches_values_computed_from_events(run_dir):
    events, steps, attrs = read_run(run_dir)
    world = int(attrs["tp"] * attrs["pp"] * attrs["dp"] * attrs.get("cp", 1))
    p, m = int(attrs["p"]), int(attrs["m"])
    all_steps = sorted(set(events["step"].tolist()))
    for step in (all_steps[0], all_steps[-1]):
        a = json.loads(post("bubble", run_dir, "--step", step, "--json").stdout)
        busy, comm, span, bubble = independent_step(events, step, world)
        assert a["step"] == step and a["ranks"] == world
        assert a["span_s"] == pytest.approx(span, rel=1e-12)
        assert a["bubble"] == pytest.approx(bubble, rel=1e-9, abs=1e-12)
        row = int(np.nonzero(steps["step"] == step)[0][0])
        assert a["bubble"] == pytest.approx(float(steps["bubble"][row]), abs=1e-9), "trident's own /steps bubble"
        assert a["bubble_theory"] == pytest.approx((p - 1) / (m + p - 1))
        assert a["bubble_predicted"] == pytest.approx(float(attrs["predicted_bubble"]))
        for stage in a["stages"]:
            members = sorted(set(events["rank"][events["pp"] == stage["stage"]].tolist()))
            stage_busy = sum(busy[r] for r in members)
            assert stage["ranks"] == len(members)
            assert stage["busy_s"] == pytest.approx(stage_busy, rel=1e-9)
            assert stage["idle_s"] == pytest.approx(len(members) * span - stage_busy, rel=1e-9, abs=1e-12)
            peak = steps["peak_activation_bytes_per_stage"][row][stage["stage"]]
            if not attrs.get("emulated"):
                assert stage["peak_activation_bytes"] == peak
        assert sum(s["busy_s"] for s in a["stages"]) == pytest.approx(sum(busy), rel=1e-9)
        for r in a["per_rank"]:
            assert r["busy_s"] == pytest.approx(busy[r["rank"]], rel=1e-9, abs=1e-12)
            assert r["exposed_comm_total_s"] == pytest.approx(comm[r["rank"]], rel=1e-9, abs=1e-12)
    per_step = a["measured_bubble_per_step"]
    assert sorted(int(s) for s in per_step) == all_steps
    for s in all_steps:
        assert per_step[str(s)] == pytest.approx(independent_step(events, s, world)[3], rel=1e-9, abs=1e-12)


def test_bubble_report_prints_the_measured_and_predicted_bubble(run_dir):
    events, _, attrs = read_run(run_dir)
    world = int(attrs["tp"] * attrs["pp"] * attrs["dp"] * attrs.get("cp", 1))
    text = post("bubble", run_dir).stdout
    last = max(events["step"].tolist())
    measured = independent_step(events, last, world)[3]
    assert f"measured {100 * measured:.1f}%" in text
    assert f"simulator (predicted_bubble) {100 * float(attrs['predicted_bubble']):.1f}%" in text
    assert "exposed communication" in text and "peak activations" in text


# ---- trace --------------------------------------------------------------------------------------

def test_trace_holds_every_event_with_its_duration(run_dir, tmp_path):
    events, _, attrs = read_run(run_dir)
    out = tmp_path / "trace.json"
    post("trace", run_dir, "-o", out)
    trace = json.loads(out.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(events["kind"])
    t0 = float(events["t_start"].min())
    expected = sorted((int(r), (float(a) - t0) * 1e6, (float(b) - float(a)) * 1e6, str(k), int(s), int(mb))
                      for r, a, b, k, s, mb in zip(events["rank"], events["t_start"], events["t_end"],
                                                   events["kind"], events["step"], events["microbatch"]))
    got = sorted((e["pid"], e["ts"], e["dur"], e["cat"], e["args"]["step"], e["args"]["microbatch"]) for e in complete)
    for want, have in zip(expected, got):
        assert have[0] == want[0] and have[3:] == want[3:], f"{have} != {want}"
        assert have[1] == pytest.approx(want[1], abs=1e-3), "ts in microseconds from the first event"
        assert have[2] == pytest.approx(want[2], rel=1e-9, abs=1e-6), "dur in microseconds"

    # One thread per stream; compute kinds share one; no two events overlap on a track.
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    stream = {"F": "compute", "B": "compute", "I": "compute", "W": "compute", "SEND": "pipeline p2p",
              "RECV": "pipeline p2p", "ALLREDUCE_TP": "TP collectives", "ALLGATHER_TP": "TP collectives",
              "REDUCE_SCATTER_TP": "TP collectives", "RING_CP": "CP ring", "ALLREDUCE_DP": "DP collectives",
              "ALLREDUCE_EMB": "DP collectives", "OPTIMIZER": "optimizer",
              "CKPT_BLOCKED": "checkpoint: training stopped", "CKPT_WRITE": "checkpoint: data written"}
    tracks = {}
    for e in complete:
        assert threads[(e["pid"], e["tid"])] == stream[e["cat"]]
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for track, spans in tracks.items():
        spans.sort()
        for (a0, a1), (b0, _) in zip(spans, spans[1:]):
            assert b0 >= a1 - 1e-3, f"overlap on track {track}: {a0}-{a1} and {b0}"
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    with_cp = int(attrs.get("cp", 1)) > 1  # the cp coordinate named where the run has the axis
    for r, tp, cp, pp, dp in set(zip(*(events[c].tolist() for c in ("rank", "tp", "cp", "pp", "dp")))):
        assert names[r] == f"r{r} tp{tp}" + (f" cp{cp}" if with_cp else "") + f" pp{pp} dp{dp}"


def test_trace_of_one_step(runs, tmp_path):
    run_dir = runs["p4-zb"]
    events, _, _ = read_run(run_dir)
    out = tmp_path / "trace.json"
    post("trace", run_dir, "-o", out, "--step", 2)
    complete = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == int((events["step"] == 2).sum())
    assert {e["args"]["step"] for e in complete} == {2}


# ---- PNGs ---------------------------------------------------------------------------------------

# The colours the drawings must use, written out here: the compute boxes of the Gantt chart by kind
# (postprocess's KIND_COLOURS) and the runs' lines of the curves (matplotlib's cycle: C0, C1, C2).
KIND_RGB = {"F": "#3b75af", "B": "#4e9f3d", "I": "#8cd17d", "W": "#b6992d"}
RUN_RGB = ("#1f77b4", "#ff7f0e", "#2ca02c")


def read_png(path):
    """The PNG's pixels, height x width x RGB, as integers 0..255."""
    return np.rint(matplotlib.image.imread(path)[..., :3] * 255).astype(int)


def pixels_of(pixels, colour, tolerance):
    """Where `pixels` have `colour` ("#rrggbb"), to within `tolerance` (Euclidean, 0..255)."""
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
    return np.sqrt(((pixels - rgb) ** 2).sum(axis=-1)) <= tolerance


def true_runs(mask):
    """[(start, end)] of the runs of True in a 1-D mask."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(int), [0]))))
    return list(zip(edges[::2], edges[1::2]))


def covered(row):
    """How many pixels of a row of boxes the boxes cover, the white edges (1 or 2 pixels) between
    adjacent boxes counted as covered."""
    runs = true_runs(row)
    gaps = [b[0] - a[1] for a, b in zip(runs, runs[1:])]
    return int(row.sum()) + sum(g for g in gaps if g <= 2)


def check_gantt(png, run_dir, step=None):
    """The Gantt chart of `step` (default the last) against the run's compute events: one band of
    compute boxes per rank, grouped by pipeline stage in stage order; each band holds the colours
    of its rank's kinds of action and no other, and its boxes cover the share of the step's compute
    span (first compute start to last compute end, all ranks) that the rank spent computing."""
    events, _, _ = read_run(run_dir)
    step = int(events["step"].max()) if step is None else step
    compute = (events["step"] == step) & np.isin(events["kind"], COMPUTE)
    span = events["t_end"][compute].max() - events["t_start"][compute].min()
    stages = {}  # stage: [(busy share, kinds of action)] of its ranks
    for r in np.unique(events["rank"][compute]):
        mine = compute & (events["rank"] == r)
        busy = float(np.sum(events["t_end"][mine] - events["t_start"][mine])) / span
        stages.setdefault(int(events["pp"][mine][0]), []).append((busy, sorted(set(events["kind"][mine]))))

    pixels = read_png(png)
    kind_pixels = {kind: pixels_of(pixels, colour, 3) for kind, colour in KIND_RGB.items()}
    boxes = np.logical_or.reduce(list(kind_pixels.values()))
    # A rank's lane: rows drawn on over half the width (its idle background spans the step, its boxes and waits lie
    # on it, whatever their share), five pixels tall or more (an axis or the dashed line between stages is thinner).
    drawn_on = np.sqrt(((pixels - 255) ** 2).sum(axis=-1)) > 12
    bands = [(a, b) for a, b in true_runs(drawn_on.mean(axis=1) >= 0.5) if b - a >= 5]
    assert len(bands) == sum(map(len, stages.values())), f"{png}: {len(bands)} bands of boxes, ranks {stages}"
    x = np.flatnonzero(boxes[np.concatenate([np.arange(a, b) for a, b in bands])].any(axis=0))
    span_px = x.max() + 1 - x.min()
    drawn = [(max(covered(boxes[y]) for y in range(a, b)) / span_px,
              sorted(k for k, where in kind_pixels.items() if where[a:b].sum() >= 20)) for a, b in bands]
    lanes = iter(drawn)
    for stage in sorted(stages):
        got, expected = sorted(next(lanes) for _ in stages[stage]), sorted(stages[stage])
        for (share, kinds), (busy, kinds_run) in zip(got, expected):
            assert kinds == kinds_run, f"{png}: stage {stage}'s lane shows {kinds}, its rank ran {kinds_run}"
            assert abs(share - busy) <= 0.02, f"{png}: stage {stage}'s boxes cover {share:.3f}, its rank ran {busy:.3f}"


def test_gantt_png_has_the_requested_size(run_dir, tmp_path):
    out = tmp_path / "g.png"
    post("gantt", run_dir, "-o", out)
    width, height = png_size(out)
    assert width == 1600 and height > 200
    check_gantt(out, run_dir)
    post("gantt", run_dir, "-o", out, "--width", 1234, "--height", 567, "--step", 1)
    assert png_size(out) == (1234, 567)
    check_gantt(out, run_dir, step=1)


def test_gantt_at_16_ranks_and_64_microbatches(tmp_path):
    """The size readability is asked for, from a simulated 1F1B timeline (16 stages, m = 64)."""
    run_dir = tmp_path / "synthetic"
    synthetic_timeline.write(run_dir, tp=1, pp=16, dp=1, m=64)
    out = tmp_path / "g16.png"
    post("gantt", run_dir, "-o", out, "--width", 2000, "--height", 900)
    assert png_size(out) == (2000, 900)
    check_gantt(out, run_dir)
    a = json.loads(post("bubble", run_dir, "--json").stdout)
    assert a["bubble"] == pytest.approx(15 / 79, abs=1e-3), "equal stages: (p - 1) / (m + p - 1)"


def curve_columns(pixels, colour, what):
    """The columns where a line of `colour` shows, and whether they are all of its x extent."""
    columns = np.flatnonzero(pixels_of(pixels, colour, 30).any(axis=0))
    assert columns.size, f"no {what} line (of {colour})"
    return columns, columns.size == columns.max() + 1 - columns.min()


def check_curves(png, runs):
    """The curves of p2 (4 steps, real compute) and the emulated p4-1f1b and p4-zb (3 steps), in
    that order: the four panels (loss, learning rate, gradient norm, tokens/s, left to right and
    top to bottom, below the legend) each hold their runs' lines, unbroken along x. The emulated
    runs have no loss or gradient norm; p4-zb's lines, drawn last, end two thirds of the way along
    p2's x extent (step 3 of 1..4); p2's learning rate goes up or down as its /steps says."""
    pixels = read_png(png)
    height, width = pixels.shape[:2]
    top = int(0.06 * height)
    panels = {"loss": pixels[top:height // 2, :width // 2], "lr": pixels[top:height // 2, width // 2:],
              "grad_norm": pixels[height // 2:, :width // 2], "tokens_per_s": pixels[height // 2:, width // 2:]}
    p2, _, p4_zb = RUN_RGB
    for name in ("loss", "grad_norm"):
        _, unbroken = curve_columns(panels[name], p2, f"{png}: p2's {name}")
        assert unbroken, f"{png}: p2's {name} line is broken"
        for colour in RUN_RGB[1:]:
            assert not pixels_of(panels[name], colour, 30).any(), f"{png}: an emulated run's line in {name}"
    columns, unbroken = curve_columns(panels["tokens_per_s"], p2, f"{png}: p2's tokens/s")
    zb_columns, zb_unbroken = curve_columns(panels["tokens_per_s"], p4_zb, f"{png}: p4-zb's tokens/s")
    assert unbroken and zb_unbroken, f"{png}: a broken tokens/s line"
    assert abs(zb_columns.min() - columns.min()) <= 3, f"{png}: the runs' tokens/s lines start at step 1 together"
    share = (zb_columns.max() - zb_columns.min()) / (columns.max() - columns.min())
    assert abs(share - 2 / 3) <= 0.03, f"{png}: p4-zb's tokens/s line spans {share:.3f} of p2's, not steps 1..3 of 1..4"
    # p4-zb's learning rate equals p2's up to step 3 and covers it there: the union is p2's line.
    lr = pixels_of(panels["lr"], p2, 30) | pixels_of(panels["lr"], p4_zb, 30)
    columns = np.flatnonzero(lr.any(axis=0))
    assert columns.size and columns.size == columns.max() + 1 - columns.min(), f"{png}: broken learning rate line"
    rows = lambda cols: np.mean([np.flatnonzero(lr[:, c]).mean() for c in cols])  # noqa: E731
    edge = max(3, columns.size // 20)
    rises = rows(columns[:edge]) > rows(columns[-edge:])  # image rows grow downwards
    steps = read_run(runs["p2"])[1]
    assert rises == (steps["lr"][-1] > steps["lr"][0]), f"{png}: p2's learning rate, {steps['lr']}, drawn the other way"


def test_curves_overlay_runs(runs, tmp_path):
    out = tmp_path / "c.png"
    proc = post("curves", *runs.values(), "-o", out, "--width", 1100, "--height", 700)
    assert png_size(out) == (1100, 700)
    for run_dir in runs.values():
        assert run_dir.name in proc.stdout
    check_curves(out, runs)


# ---- compare ------------------------------------------------------------------------------------

def test_compare_two_runs(runs):
    a, b = runs["p4-1f1b"], runs["p4-zb"]
    text = post("compare", a, b).stdout
    assert a.name in text and b.name in text
    for label in ("grid", "schedule", "step time", "bubble measured", "MFU", "final loss"):
        assert label in text
    assert "zb-h1" in text and "1f1b" in text
    rows = {line.split("  ")[0]: line.split() for line in text.splitlines()}
    _, steps, _ = read_run(a)
    median = float(np.median(steps["step_time_s"][1:] if len(steps["step_time_s"]) > 2 else steps["step_time_s"]))
    assert rows["step time, median [ms]"][-2] == f"{median * 1e3:.2f}"


def test_compare_reports_the_last_validation_loss(runs):
    a, b = runs["p2"], runs["p4-1f1b"]
    text = post("compare", a, b).stdout
    row = next(line for line in text.splitlines() if line.startswith("last validation loss (step)"))
    _, steps, _ = read_run(a)
    assert np.isnan(steps["val_loss"][[0, 2]]).all()
    assert row.split()[-3:] == [f"{steps['val_loss'][3]:.4f}", "(4)", "-"], row  # the emulated run has none


def test_compare_shows_the_share_of_the_step_lost_to_communication(runs):
    """p2 runs dp = 2 (its gradient all-reduce can be exposed), tp = 1; the values are the medians,
    over the steps after the first, of the /steps time columns divided by step_time_s."""
    a, b = runs["p2"], runs["p4-1f1b"]
    rows = {line.split("  ")[0]: line.split() for line in post("compare", a, b).stdout.splitlines()}
    for label, column in (("DP all-reduce exposed, median", "dp_exposed_s"),
                          ("TP collectives blocked, median", "tp_comm_s")):
        for index, run in ((-2, a), (-1, b)):
            _, steps, _ = read_run(run)
            share = steps[column] / steps["step_time_s"]
            expected = float(np.median(share[1:] if len(share) > 2 else share))
            assert rows[label][index] == f"{100 * expected:.1f}%", (label, run.name, rows[label])


# ---- errors -------------------------------------------------------------------------------------

def error_commands(target, tmp_path):
    return [("gantt", target, "-o", tmp_path / "x.png"), ("bubble", target), ("trace", target, "-o", tmp_path / "x.json"),
            ("curves", target, "-o", tmp_path / "y.png"), ("compare", target, target)]


def test_missing_and_foreign_files_fail_with_one_clear_line(runs, tmp_path):
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a timeline\n")
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["data"] = np.arange(3)
    checkpoint = next((runs["p2"] / "checkpoints").glob("step_*.h5"))
    cases = {tmp_path / "missing": "no such", tmp_path: "no timeline.h5", text_file: "not an HDF5 file",
             foreign: "not a trident timeline", checkpoint: "not a trident timeline"}
    for target, reason in cases.items():
        for command in error_commands(target, tmp_path):
            proc = post(*command, expect=2)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"trident-post {command[0]}: error: "), proc.stderr
            assert str(target) in lines[0] and reason in lines[0], lines[0]
    for target in (tmp_path / "missing", text_file, runs["p2"] / "timeline.h5"):
        proc = post("ckpt", target, expect=2)
        assert proc.stderr.startswith("trident-post ckpt: error: ") and str(target) in proc.stderr


def test_a_step_without_events_is_refused(runs, tmp_path):
    proc = post("gantt", runs["p2"], "-o", tmp_path / "x.png", "--step", 999, expect=2)
    assert "step 999 has no events" in proc.stderr


# ---- checkpoints --------------------------------------------------------------------------------

def python_checksum(values):
    """The writer's checksum (src/io/tensor_slice.hpp) in plain Python integers."""
    mask = (1 << 64) - 1
    total = 0
    for index, bits in enumerate(np.ascontiguousarray(values, dtype="<f4").reshape(-1).view("<u4").tolist()):
        x = (index * 0x9E3779B97F4A7C15 + bits) & mask
        x ^= x >> 30
        x = (x * 0xBF58476D1CE4E5B9) & mask
        x ^= x >> 27
        x = (x * 0x94D049BB133111EB) & mask
        x ^= x >> 31
        total = (total + x) & mask
    return total


def test_ckpt_verifies_every_checkpoint(run_dir):
    checkpoints = sorted((run_dir / "checkpoints").glob("step_*.h5"))
    assert checkpoints
    for path in checkpoints:
        with h5py.File(path, "r") as f:
            step, grid = int(f.attrs["step"]), str(f.attrs["grid"])
            count = []
            f.visititems(lambda n, o: count.append(n) if isinstance(o, h5py.Dataset) else None)
            small = f["model/ln_f/bias"]
            assert python_checksum(small[()]) == int(small.attrs["checksum"]), "the test's own checksum"
        out = post("ckpt", path).stdout
        assert f"step {step}" in out and f"all {len(count)} checksums verified" in out
        sizes = grid.split("x")  # tp x pp x dp, or tp x cp x pp x dp
        axes = ("tp", "pp", "dp") if len(sizes) == 3 else ("tp", "cp", "pp", "dp")
        assert " x ".join(f"{axis}{size}" for axis, size in zip(axes, sizes)) in out
        assert "/model/wte/weight" in out and "/optimizer/m/wte/weight" in out
    latest = (run_dir / "checkpoints" / "latest").read_text().strip()
    assert str(run_dir / "checkpoints" / latest) in post("ckpt", run_dir).stdout


def test_ckpt_detects_a_flipped_byte(runs, tmp_path):
    source = sorted((runs["p2"] / "checkpoints").glob("step_*.h5"))[-1]
    for dataset in ("model/h/1/mlp/c_fc/weight", "optimizer/v/wpe/weight"):
        copy = tmp_path / source.name
        shutil.copyfile(source, copy)
        with h5py.File(copy, "r") as f:
            ds = f[dataset]
            offset = ds.id.get_offset()
            assert offset is not None and ds.chunks is None, "contiguous dataset expected"
            nbytes = ds.size * ds.dtype.itemsize
        data = bytearray(copy.read_bytes())
        data[offset + nbytes // 2 + 1] ^= 0x04
        copy.write_bytes(bytes(data))
        proc = post("ckpt", copy, expect=1)
        assert f"/{dataset}" in proc.stderr and "checksum" in proc.stderr
        assert "MISMATCH" in proc.stdout


def test_ckpt_to_torch(runs, tmp_path):
    path = sorted((runs["p2"] / "checkpoints").glob("step_*.h5"))[-1]
    out = tmp_path / "gpt2.pt"
    import torch  # python3-torch: scripts/setup --tests installs it

    post("ckpt", "--to-torch", path, out)
    state = torch.load(out)
    with h5py.File(path, "r") as f:
        assert np.array_equal(state["transformer.h.0.attn.c_attn.weight"].numpy(), f["model/h/0/attn/c_attn/weight"][()])
        assert np.array_equal(state["lm_head.weight"].numpy(), f["model/wte/weight"][()])
        assert "transformer.ln_f.bias" in state and "transformer.wpe.weight" in state


def test_ckpt_to_torch_without_torch_says_so(runs, tmp_path):
    """With torch unimportable (blocked here), --to-torch exits 2 with a message and writes nothing."""
    path = sorted((runs["p2"] / "checkpoints").glob("step_*.h5"))[-1]
    out = tmp_path / "gpt2.pt"
    code = ("import sys; sys.modules['torch'] = None; sys.path.insert(0, sys.argv[1]); "
            "from trident_post.cli import main; sys.exit(main(sys.argv[2:]))")
    proc = subprocess.run([sys.executable, "-c", code, str(TOOL.parent), "ckpt", "--to-torch", str(path), str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "needs PyTorch" in proc.stderr and not out.exists()

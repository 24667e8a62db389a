"""`trident-post bubble RUN`: where one step's time went. Per pipeline stage and in total, busy
(compute: F, B, I, W) against idle rank-time, the measured bubble beside the 1F1B theory and the
simulator's prediction, the communication waits that were not hidden (per rank), and the peak
activation memory per stage.

The measured bubble is trident's own (src/train/event_log.hpp):

    bubble = 1 - sum over ranks of compute time / (ranks x span),
    span   = latest compute t_end - earliest compute t_start of the step (all ranks).

A stage's bubble uses the same span and that stage's ranks, so the total is the rank-weighted mean
of the stages'."""
import json

import numpy as np

from .timeline import COMMUNICATION_KINDS, COMPUTE_KINDS, PostError, Timeline

HELP = "busy vs idle per stage, measured bubble vs theory and simulator, exposed communication"


def add_parser(subparsers):
    p = subparsers.add_parser(
        "bubble", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
        epilog="Example: trident-post bubble runs/tiny --step 5")
    p.add_argument("run", metavar="RUN", help="run directory (the deck's output.dir) or its timeline.h5")
    p.add_argument("--step", type=int, default=None, help="step to analyse (default: the last step with events)")
    p.add_argument("--json", action="store_true", help="print the numbers as one JSON object instead of tables")
    p.set_defaults(func=run)
    return p


def bubble_of(busy_s, ranks, span_s):
    """1 − busy / (ranks × span): the one bubble formula, for a stage, a step or a whole run."""
    capacity = ranks * span_s
    return 1.0 - busy_s / capacity if capacity > 0 else 0.0


def compute_mask(kinds):
    return np.isin(kinds, COMPUTE_KINDS)


def step_analysis(tl, step):
    """The numbers of `bubble` for one step of a Timeline, as a plain dict."""
    ev = tl.step_events(step)
    kinds = ev["kind"]
    duration = ev["t_end"] - ev["t_start"]
    is_compute = compute_mask(kinds)
    coords = tl.rank_coords()
    world = tl.world_size
    if is_compute.any():
        first = float(ev["t_start"][is_compute].min())
        last = float(ev["t_end"][is_compute].max())
    else:
        first = last = float(ev["t_start"].min()) if len(kinds) else 0.0
    span = last - first
    step_start = float(ev["t_start"].min()) if len(kinds) else 0.0
    step_end = float(ev["t_end"].max()) if len(kinds) else 0.0

    ranks = []
    for r in range(world):
        mine = ev["rank"] == r
        busy = float(duration[mine & is_compute].sum())
        comm = {k: float(duration[mine & (kinds == k)].sum()) for k in COMMUNICATION_KINDS}
        tp, pp, dp = coords[r]
        ranks.append({"rank": r, "tp": tp, "pp": pp, "dp": dp, "busy_s": busy,
                      "optimizer_s": float(duration[mine & (kinds == "OPTIMIZER")].sum()),
                      "exposed_comm_s": comm, "exposed_comm_total_s": sum(comm.values())})

    row = tl.step_row(step)
    per_stage_peak = None
    if row is not None and "peak_activation_bytes_per_stage" in tl.steps:
        per_stage_peak = np.atleast_1d(np.asarray(tl.steps["peak_activation_bytes_per_stage"][row])).tolist()
        if tl.emulated and not any(per_stage_peak):
            per_stage_peak = None  # emulated actions hold no activations

    stages = []
    for s in range(tl.pp):
        members = [r for r in ranks if r["pp"] == s]
        busy = sum(r["busy_s"] for r in members)
        capacity = len(members) * span
        stages.append({"stage": s, "ranks": len(members), "busy_s": busy, "idle_s": capacity - busy,
                       "bubble": bubble_of(busy, len(members), span),
                       "peak_activation_bytes": (int(per_stage_peak[s]) if per_stage_peak is not None
                                                 and s < len(per_stage_peak) else None)})
    busy_total = sum(r["busy_s"] for r in ranks)
    capacity = world * span
    recorded = float(tl.steps["bubble"][row]) if row is not None else None
    return {
        "run": tl.name, "timeline": str(tl.path), "step": step, "schedule": tl.schedule, "p": tl.p, "m": tl.m,
        "v": tl.v, "tp": tl.tp, "pp": tl.pp, "dp": tl.dp, "ranks": world, "emulated": tl.emulated,
        "compute_start_s": first, "compute_end_s": last, "span_s": span,
        "step_events_span_s": step_end - step_start,
        "step_time_s": float(tl.steps["step_time_s"][row]) if row is not None else None,
        "busy_s": busy_total, "idle_s": capacity - busy_total,
        "bubble": bubble_of(busy_total, world, span),
        "bubble_recorded": recorded, "bubble_theory": tl.theory_bubble, "bubble_predicted": tl.predicted_bubble,
        "stages": stages, "per_rank": ranks,
    }


def measured_bubbles(tl):
    """{step: measured bubble} for every step with events (vectorised over the whole /events)."""
    ev = tl.events
    steps_with_events = tl.event_steps()
    out = {step: 0.0 for step in steps_with_events}
    mask = compute_mask(ev["kind"])
    if not mask.any():
        return out
    steps, inverse = np.unique(ev["step"][mask], return_inverse=True)
    t_start, t_end = ev["t_start"][mask], ev["t_end"][mask]
    busy = np.bincount(inverse, weights=t_end - t_start, minlength=len(steps))
    first = np.full(len(steps), np.inf)
    last = np.full(len(steps), -np.inf)
    np.minimum.at(first, inverse, t_start)
    np.maximum.at(last, inverse, t_end)
    span = last - first
    for i, step in enumerate(steps):
        out[int(step)] = float(bubble_of(busy[i], tl.world_size, span[i]))
    return out


def _pct(x):
    return "     -" if x is None else f"{100.0 * x:5.1f}%"


def _mib(b):
    return "-" if b is None else f"{b / 2**20:.2f}"


def format_report(a, all_steps=None):
    lines = []
    lines.append(f"{a['run']}: schedule {a['schedule']}, p {a['p']}, m {a['m']}" + (f", v {a['v']}" if a["v"] > 1 else "")
                 + f", tp{a['tp']} x pp{a['pp']} x dp{a['dp']} = {a['ranks']} ranks"
                 + (", emulated compute" if a["emulated"] else ""))
    step_time = "" if a["step_time_s"] is None else f", step time {a['step_time_s'] * 1e3:.2f} ms"
    lines.append(f"step {a['step']}: compute span {a['span_s'] * 1e3:.2f} ms (first compute start to last compute end"
                 f", all ranks){step_time}")
    lines.append("")
    lines.append("stage  ranks   busy [ms]   idle [ms]  bubble  peak activations [MiB]")
    for s in a["stages"]:
        lines.append(f"{s['stage']:>5}  {s['ranks']:>5}  {s['busy_s'] * 1e3:10.2f}  {s['idle_s'] * 1e3:10.2f}  "
                     f"{_pct(s['bubble'])}  {_mib(s['peak_activation_bytes']):>22}")
    lines.append(f"{'total':>5}  {a['ranks']:>5}  {a['busy_s'] * 1e3:10.2f}  {a['idle_s'] * 1e3:10.2f}  "
                 f"{_pct(a['bubble'])}")
    lines.append("")
    lines.append(f"bubble  measured {_pct(a['bubble']).strip()}   recorded in /steps {_pct(a['bubble_recorded']).strip()}"
                 f"   simulator (predicted_bubble) {_pct(a['bubble_predicted']).strip()}"
                 f"   theory (p-1)/(m+p-1) {_pct(a['bubble_theory']).strip()}")
    if all_steps and len(all_steps) > 1:
        values = np.array(list(all_steps.values()))
        later = values[1:] if len(values) > 2 else values
        excluded = " (first step excluded: it warms up)" if len(values) > 2 else ""
        lines.append(f"        over steps {min(all_steps)}-{max(all_steps)}: median {_pct(float(np.median(later))).strip()}"
                     f"{excluded}, min {_pct(values.min()).strip()}, max {_pct(values.max()).strip()}")
    lines.append("")
    used = [k for k in COMMUNICATION_KINDS if any(r["exposed_comm_s"][k] > 0 for r in a["per_rank"])]
    lines.append(f"exposed communication (time a rank waited, not hidden behind compute) [ms]; step = first to last "
                 f"event of step {a['step']}, {a['step_events_span_s'] * 1e3:.2f} ms")
    header = f"{'rank':>4} {'tp':>3} {'pp':>3} {'dp':>3}  " + "".join(f"{k:>14}" for k in used) + \
        f"{'total':>10} {'% of step':>10}"
    lines.append(header)
    for r in sorted(a["per_rank"], key=lambda r: (r["pp"], r["dp"], r["tp"], r["rank"])):
        share = (r["exposed_comm_total_s"] / a["step_events_span_s"]) if a["step_events_span_s"] > 0 else 0.0
        lines.append(f"{r['rank']:>4} {r['tp']:>3} {r['pp']:>3} {r['dp']:>3}  "
                     + "".join(f"{r['exposed_comm_s'][k] * 1e3:14.2f}" for k in used)
                     + f"{r['exposed_comm_total_s'] * 1e3:10.2f} {_pct(share):>10}")
    if not used:
        lines.append("(no communication waits recorded in this step)")
    return "\n".join(lines)


def run(args):
    tl = Timeline(args.run)
    step = tl.resolve_step(args.step)
    analysis = step_analysis(tl, step)
    if args.json:
        analysis["measured_bubble_per_step"] = {str(k): v for k, v in measured_bubbles(tl).items()}
        print(json.dumps(analysis, indent=1))
    else:
        print(format_report(analysis, measured_bubbles(tl)))
    return 0


__all__ = ["add_parser", "run", "step_analysis", "measured_bubbles", "PostError"]

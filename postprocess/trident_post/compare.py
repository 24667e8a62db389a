"""`trident-post compare RUN RUN [RUN ...]`: runs side by side: grid, schedule, step time, tokens/s,
bubble (measured, simulator, theory), exposed DP and TP communication, MFU and the final loss. Medians are over every step but the
first (which warms up) when a run has more than two steps."""
import numpy as np

from .bubble import measured_bubbles
from .timeline import PostError, Timeline, unique_names

HELP = "side-by-side table of runs: grid, schedule, step time, bubble, MFU, final and validation loss"


def add_parser(subparsers):
    p = subparsers.add_parser("compare", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Example: trident-post compare runs/1f1b runs/zb-h1")
    p.add_argument("runs", metavar="RUN", nargs="+", help="two (or more) run directories or timeline.h5 files")
    p.set_defaults(func=run)
    return p


def _later(values):
    values = np.asarray(values, dtype=float)
    return values[1:] if len(values) > 2 else values


def _median(values):
    later = _later(values)
    return float(np.median(later)) if len(later) else None


def _share_of_step(steps, name):
    """Median of a /steps time column over step_time_s; None for a timeline without the column."""
    if name not in steps:
        return None
    return _median(np.asarray(steps[name], dtype=float) / np.asarray(steps["step_time_s"], dtype=float))


def summary(tl):
    steps = tl.steps
    n = len(tl.step_numbers())
    bubbles = measured_bubbles(tl)
    measured = _median([bubbles[s] for s in sorted(bubbles)]) if bubbles else None
    last = int(np.argmax(tl.step_numbers())) if n else None
    return {
        "grid": tl.grid_text(), "ranks": tl.world_size, "schedule": tl.schedule,
        "p_m_v": f"{tl.p} / {tl.m} / {tl.v}", "mbs": tl.attrs.get("micro_batch_size"),
        "model": (f"L{tl.attrs['layers']} C{tl.attrs['d_model']} H{tl.attrs['heads']} T{tl.attrs['seq_len']} "
                  f"V{tl.attrs['vocab']}" if all(k in tl.attrs for k in ("layers", "d_model", "heads", "seq_len",
                                                                         "vocab")) else "?"),
        "compute": "emulated" if tl.emulated else "real",
        "steps": (f"{int(tl.step_numbers().min())}-{int(tl.step_numbers().max())}" if n else "none"),
        "step_time_ms": None if not n else _median(steps["step_time_s"]) * 1e3,
        "tokens_per_s": None if not n else _median(steps["tokens_per_s"]),
        "bubble": measured,
        "bubble_predicted": tl.predicted_bubble,
        "bubble_theory": tl.theory_bubble,
        "dp_exposed": _share_of_step(steps, "dp_exposed_s") if n else None,
        "tp_comm": _share_of_step(steps, "tp_comm_s") if n else None,
        "cp_comm": _share_of_step(steps, "cp_comm_s") if n else None,
        "ep_comm": _share_of_step(steps, "ep_comm_s") if n else None,
        "mfu": _median(steps["mfu"]) if n and "mfu" in steps else None,
        "final_loss": None if (not n or tl.emulated) else float(steps["loss"][last]),
        "last_val_loss": _last_validation(tl),
    }


def _last_validation(tl):
    """(step, loss) of the run's last validation, or None (no [eval], or a timeline older than val_loss)."""
    if "val_loss" not in tl.steps:
        return None
    values = np.asarray(tl.steps["val_loss"], dtype=float)
    measured = np.flatnonzero(np.isfinite(values))
    if not len(measured):
        return None
    steps = tl.step_numbers()
    last = measured[np.argmax(steps[measured])]
    return int(steps[last]), float(values[last])


ROWS = (
    ("grid", "grid", str),
    ("ranks", "ranks", str),
    ("schedule", "schedule", str),
    ("p / m / v", "p_m_v", str),
    ("micro-batch size", "mbs", str),
    ("model", "model", str),
    ("compute", "compute", str),
    ("steps", "steps", str),
    ("step time, median [ms]", "step_time_ms", lambda x: f"{x:.2f}"),
    ("tokens/s, median", "tokens_per_s", lambda x: f"{x:,.0f}"),
    ("bubble measured, median", "bubble", lambda x: f"{100 * x:.1f}%"),
    ("bubble simulator", "bubble_predicted", lambda x: f"{100 * x:.1f}%"),
    ("bubble theory (p-1)/(m+p-1)", "bubble_theory", lambda x: f"{100 * x:.1f}%"),
    ("DP all-reduce exposed, median", "dp_exposed", lambda x: f"{100 * x:.1f}%"),
    ("TP collectives blocked, median", "tp_comm", lambda x: f"{100 * x:.1f}%"),
    ("CP ring blocked, median", "cp_comm", lambda x: f"{100 * x:.1f}%"),
    ("EP all-to-all blocked, median", "ep_comm", lambda x: f"{100 * x:.1f}%"),
    ("MFU, median", "mfu", lambda x: f"{100 * x:.2f}%"),
    ("final loss", "final_loss", lambda x: f"{x:.4f}"),
    ("last validation loss (step)", "last_val_loss", lambda x: f"{x[1]:.4f} ({x[0]})"),
)


def format_table(names, summaries):
    cells = [[label] + [("-" if s[key] is None else fmt(s[key])) for s in summaries] for label, key, fmt in ROWS]
    header = [""] + names
    widths = [max(len(row[i]) for row in cells + [header]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(header))]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))
    if len(summaries) == 2:
        a, b = summaries
        if a["step_time_ms"] and b["step_time_ms"]:
            lines.append("")
            lines.append(f"step time {names[1]} / {names[0]} = {b['step_time_ms'] / a['step_time_ms']:.3f}")
    lines.append("(medians over steps 2.. when a run has more than two steps; the first step warms up; "
                 "emulated runs have no loss)")
    return "\n".join(lines)


def run(args):
    if len(args.runs) < 2:
        raise PostError("compare needs at least two runs: trident-post compare RUN RUN [RUN ...]")
    timelines = [Timeline(r) for r in args.runs]
    names = unique_names(args.runs)
    print(format_table(names, [summary(tl) for tl in timelines]))
    return 0

"""`trident-post gantt RUN -o FILE.png`: the pipeline diagram of one step. One lane per rank,
grouped by pipeline stage and labelled with its coordinates (r<rank> tp<tp> pp<pp> dp<dp>); a box
per action or wait, coloured by kind (F, B, I, W full height; SEND/RECV waits thin; all-reduces
half height; optimizer) and labelled with its micro-batch where it fits. A checkpoint's data being
written in the background (checkpoint.async) is a thin strip along the bottom of the lane where it
overlaps the step; with --checkpoints the picture extends to the stops for the step's checkpoint
after it (CKPT_BLOCKED, full height). The grey band behind the lanes spans the step's compute (first compute start to last compute end,
all ranks): what shows of it is the bubble that trident measures."""

import numpy as np

from .bubble import step_analysis
from .figure import (DPI, IDLE_COLOUR, KIND_COLOURS, KIND_LABELS, OTHER_COLOUR, check_size, new_figure, save)
from .timeline import (CHECKPOINT_BLOCKED, CHECKPOINT_WRITE, COMPUTE_KINDS, CP_RING_KINDS, DP_COLLECTIVE_KINDS,
                       EP_ALLTOALL_KINDS, P2P_KINDS, TP_COLLECTIVE_KINDS, PostError, Timeline)

HELP = "pipeline diagram (PNG) of one step: a lane per rank, boxes by kind, idle = bubble"

DEFAULT_WIDTH = 1600
LANE_PX = 30          # default lane pitch when --height is not given
STAGE_GAP = 0.6       # blank space between stages, in lanes
TOP_PX, BOTTOM_PX, RIGHT_PX = 58, 92, 24

# Box height (fraction of a lane) by kind; waits are drawn thin so that the lane still reads as idle.
HEIGHTS = {k: 0.78 for k in COMPUTE_KINDS}
HEIGHTS.update({k: 0.30 for k in P2P_KINDS})
HEIGHTS.update({k: 0.50 for k in TP_COLLECTIVE_KINDS + CP_RING_KINDS + EP_ALLTOALL_KINDS + DP_COLLECTIVE_KINDS})
HEIGHTS["OPTIMIZER"] = 0.78
HEIGHTS[CHECKPOINT_BLOCKED] = 0.78
HEIGHTS[CHECKPOINT_WRITE] = 0.14
OFFSETS = {CHECKPOINT_WRITE: 0.40}  # below the lane's middle: the strip runs under the actions


def add_parser(subparsers):
    p = subparsers.add_parser("gantt", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Example: trident-post gantt runs/tiny -o gantt.png --step 5 --width 2400")
    p.add_argument("run", metavar="RUN", help="run directory (the deck's output.dir) or its timeline.h5")
    p.add_argument("-o", "--output", metavar="FILE.png", required=True, help="PNG file to write")
    p.add_argument("--step", type=int, default=None, help="step to draw (default: the last step with events)")
    p.add_argument("--width", type=int, default=DEFAULT_WIDTH, help=f"image width in pixels (default {DEFAULT_WIDTH})")
    p.add_argument("--height", type=int, default=None,
                   help=f"image height in pixels (default: {TOP_PX + BOTTOM_PX} + {LANE_PX} per rank lane)")
    p.add_argument("--checkpoints", action="store_true",
                   help="extend the picture to the step's checkpoint stops after it (default: the step's work only)")
    p.set_defaults(func=run)
    return p


def default_height(lanes, stages):
    return int(round(TOP_PX + BOTTOM_PX + LANE_PX * (lanes + STAGE_GAP * max(stages - 1, 0)) + 8))


def _dark(colour):
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b < 0.55  # perceived luminance


def _label_width_px(text, font_pt):
    return len(text) * 0.62 * font_pt * DPI / 72 + 3


def events_to_draw(tl, step, checkpoints=False):
    """The step's events and the checkpoint writes of any step that overlap its time, clipped to it;
    with that time window (t0, t1): the step's work, and with `checkpoints` its checkpoint stops."""
    ev = tl.step_events(step)
    in_window = ~np.isin(ev["kind"], (CHECKPOINT_WRITE,) if checkpoints else (CHECKPOINT_WRITE, CHECKPOINT_BLOCKED))
    if not in_window.any():
        in_window = np.ones_like(in_window)
    t0, t1 = float(ev["t_start"][in_window].min()), float(ev["t_end"][in_window].max())
    if not checkpoints:
        ev = {name: column[ev["kind"] != CHECKPOINT_BLOCKED] for name, column in ev.items()}
    every = tl.events
    overlapping = np.nonzero((every["kind"] == CHECKPOINT_WRITE) & (every["step"] != step) &
                             (every["t_end"] > t0) & (every["t_start"] < t1))[0]
    if len(overlapping):
        ev = {name: np.concatenate([column, every[name][overlapping]]) for name, column in ev.items()}
    writes = ev["kind"] == CHECKPOINT_WRITE
    visible = ~writes | ((ev["t_end"] > t0) & (ev["t_start"] < t1))
    ev = {name: column[visible] for name, column in ev.items()}
    writes = ev["kind"] == CHECKPOINT_WRITE
    ev["t_start"] = np.where(writes, np.maximum(ev["t_start"], t0), ev["t_start"])
    ev["t_end"] = np.where(writes, np.minimum(ev["t_end"], t1), ev["t_end"])
    return ev, t0, t1


def draw(tl, step, output, width, height=None, checkpoints=False):
    check_size(width, height)
    analysis = step_analysis(tl, step)
    ev, t0, t_last = events_to_draw(tl, step, checkpoints)
    coords = tl.rank_coords()
    ranks = sorted(coords, key=lambda r: (coords[r][1], coords[r][2], coords[r][0], r))
    stages = sorted({coords[r][1] for r in ranks})
    lane_y = {}
    y = 0.0
    for i, r in enumerate(ranks):
        if i and coords[r][1] != coords[ranks[i - 1]][1]:
            y += STAGE_GAP
        lane_y[r] = y
        y += 1.0
    y_extent = y  # lanes occupy [0, y_extent)
    if height is None:
        height = default_height(len(ranks), len(stages))
    check_size(width, height)

    names = tl.rank_labels()
    labels = [names[r] for r in ranks]
    plot_px_h = height - TOP_PX - BOTTOM_PX
    if plot_px_h < 20:
        raise PostError(f"--height {height}: too small for {len(ranks)} lanes (give at least "
                        f"{TOP_PX + BOTTOM_PX + 4 * len(ranks)} pixels)")
    lane_px = plot_px_h / y_extent
    font_pt = float(np.clip(0.40 * lane_px * 72 / DPI, 4.5, 9.0))
    left_px = int(max(_label_width_px(s, font_pt) for s in labels) + 14)
    plot_px_w = width - left_px - RIGHT_PX
    if plot_px_w < 50:
        raise PostError(f"--width {width}: too small (give at least {left_px + RIGHT_PX + 200} pixels)")

    fig = new_figure(width, height)
    ax = fig.add_axes([left_px / width, BOTTOM_PX / height, plot_px_w / width, plot_px_h / height])

    total_ms = max((t_last - t0) * 1e3, 1e-6)
    ax.set_xlim(0.0, total_ms)
    ax.set_ylim(y_extent, 0.0)
    ms_per_px = total_ms / plot_px_w

    # The compute span of the step: what is left grey in it is the measured bubble.
    span_lo = (analysis["compute_start_s"] - t0) * 1e3
    span_w = analysis["span_s"] * 1e3
    for r in ranks:
        ax.broken_barh([(span_lo, span_w)], (lane_y[r] + 0.06, 0.88), facecolors=IDLE_COLOUR, edgecolor="none",
                       zorder=0)

    kinds = ev["kind"]
    start_ms = (ev["t_start"] - t0) * 1e3
    dur_ms = (ev["t_end"] - ev["t_start"]) * 1e3
    present = []
    for kind in list(KIND_COLOURS) + sorted(set(kinds) - set(KIND_COLOURS)):
        if not (kinds == kind).any():
            continue
        present.append(kind)
        colour = KIND_COLOURS.get(kind, OTHER_COLOUR)
        h = HEIGHTS.get(kind, 0.5)
        edge_w = 0.5 if kind in COMPUTE_KINDS and lane_px >= 8 else 0.0
        for r in ranks:
            sel = (kinds == kind) & (ev["rank"] == r)
            if not sel.any():
                continue
            ax.broken_barh(list(zip(start_ms[sel], dur_ms[sel])), (lane_y[r] + 0.5 + OFFSETS.get(kind, 0) - h / 2, h),
                           facecolors=colour,
                           edgecolor="white" if edge_w else "none", linewidth=edge_w, zorder=2)

    _label_boxes(ax, ev, lane_y, ranks, start_ms, dur_ms, ms_per_px, font_pt, lane_px, tl.v)

    ax.set_yticks([lane_y[r] + 0.5 for r in ranks])
    ax.set_yticklabels(labels, fontsize=font_pt, family="monospace")
    ax.tick_params(axis="y", length=0)
    for i in range(1, len(ranks)):
        if coords[ranks[i]][1] != coords[ranks[i - 1]][1]:
            ax.axhline(lane_y[ranks[i]] - STAGE_GAP / 2, color="#b0b0b0", linewidth=0.8, linestyle=(0, (4, 3)))
    ax.set_xlabel("time since the step's first event [ms]", fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#d8d8d8", linewidth=0.5, zorder=-1)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    title = (f"{tl.name} - step {step}:  {tl.schedule}, p {tl.p}, m {tl.m}" + (f", v {tl.v}" if tl.v > 1 else "")
             + f", {tl.grid_text()}" + (", emulated" if tl.emulated else ""))
    subtitle = (f"bubble measured {pct(analysis['bubble'])}   theory (p-1)/(m+p-1) {pct(analysis['bubble_theory'])}"
                f"   simulator {pct(analysis['bubble_predicted'])}   compute span {span_w:.1f} ms")
    fig.text(left_px / width, 1 - 8 / height, title, fontsize=11, weight="bold", va="top", ha="left")
    fig.text(left_px / width, 1 - 30 / height, subtitle, fontsize=9, va="top", ha="left", color="#333333")

    import matplotlib.patches as mpatches
    handles = [mpatches.Patch(facecolor=KIND_COLOURS.get(k, OTHER_COLOUR), label=KIND_LABELS.get(k, k))
               for k in present]
    handles.append(mpatches.Patch(facecolor=IDLE_COLOUR, edgecolor="#c0c0c0", label="idle (bubble)"))
    per_row = max(1, min(len(handles), int(width // 150)))
    fig.legend(handles=handles, loc="lower center", ncol=per_row, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0), handlelength=1.4, columnspacing=1.2)
    save(fig, output, width, height)
    return width, height


def _label_boxes(ax, ev, lane_y, ranks, start_ms, dur_ms, ms_per_px, font_pt, lane_px, v):
    """Micro-batch numbers on compute boxes ('F3' where it fits, else '3'). When the boxes are
    too narrow for their numbers (many micro-batches), only every k-th micro-batch is labelled
    (k a power of two), in the box's colour on white where it overflows the box, skipping a label
    that would collide with the previous one in its lane."""
    if lane_px < 7:
        return
    kinds, mb, chunk = ev["kind"], ev["microbatch"], ev["chunk"]
    compute = np.isin(kinds, COMPUTE_KINDS) & (mb >= 0)
    if not compute.any():
        return
    box_px = dur_ms / ms_per_px

    def number(i):
        return f"{mb[i]}.{chunk[i]}" if v > 1 and chunk[i] >= 0 else f"{mb[i]}"

    # Thinning stride: how many boxes a typical label needs.
    rows = np.nonzero(compute)[0]
    fitting = np.mean([_label_width_px(number(i), font_pt) <= box_px[i] for i in rows])
    stride = 1
    if fitting < 0.9:
        typical = float(np.median(box_px[rows]))
        need = float(np.median([_label_width_px(number(i), font_pt) for i in rows]))
        stride = 2
        while stride < 64 and need > stride * typical * 0.8:
            stride *= 2
    for r in ranks:
        lane = np.nonzero(compute & (ev["rank"] == r))[0]
        lane = lane[np.argsort(start_ms[lane], kind="stable")]
        last_right = -np.inf
        for i in lane:
            if mb[i] % stride:
                continue
            text = f"{kinds[i]}{number(i)}"
            w = _label_width_px(text, font_pt)
            if w > box_px[i]:
                text = number(i)
                w = _label_width_px(text, font_pt)
            fits = w <= box_px[i]
            if not fits and (stride == 1 or w > 5 * box_px[i] + 4):
                continue
            centre_px = (start_ms[i] + dur_ms[i] / 2) / ms_per_px
            if centre_px - w / 2 < last_right + 1:
                continue
            colour = KIND_COLOURS.get(str(kinds[i]), OTHER_COLOUR)
            if fits:
                ax.text(start_ms[i] + dur_ms[i] / 2, lane_y[r] + 0.5, text, ha="center", va="center",
                        fontsize=font_pt, color="white" if _dark(colour) else "black", zorder=3, clip_on=True)
            else:
                ax.text(start_ms[i] + dur_ms[i] / 2, lane_y[r] + 0.5, text, ha="center", va="center",
                        fontsize=font_pt, color=_darker(colour), weight="bold", zorder=3, clip_on=True,
                        bbox=dict(boxstyle="square,pad=0.08", facecolor="white", alpha=0.9, edgecolor=colour,
                                  linewidth=0.6))
            last_right = centre_px + w / 2


def _darker(colour):
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#%02x%02x%02x" % (int(r * 0.7), int(g * 0.7), int(b * 0.7))


def run(args):
    tl = Timeline(args.run)
    step = tl.resolve_step(args.step)
    width, height = draw(tl, step, args.output, args.width, args.height, args.checkpoints)
    print(f"{args.output}: step {step} of {tl.describe()} ({width}x{height} px)")
    return 0

"""`trident-post stragglers RUN`: ranks persistently slower than their peers at the same pipeline
stage. Each rank's compute time per step is the sum of its F, B, I and W events in /events; the
ranks of one stage (its tp, cp and dp peers) do the same work, so a rank's ratio in a step is its
compute time over the median of its stage peers'. A rank is a straggler where the ratio is at least
--threshold for at least --persist consecutive steps: listed with how much slower (the median ratio
over those steps) and since which step. -o draws the ratios, rank by step. A stage of one rank has
no peers and is not judged."""
import json
import sys

import numpy as np

from .figure import add_size_arguments, check_size, new_figure, save
from .timeline import COMPUTE_KINDS, PostError, Timeline

HELP = "ranks persistently slower than their stage's peers: by how much, since which step (-o: picture)"
DEFAULT_WIDTH, DEFAULT_HEIGHT = 1200, 700


def add_parser(subparsers):
    p = subparsers.add_parser("stragglers", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Example: trident-post stragglers runs/big -o stragglers.png")
    p.add_argument("run", metavar="RUN", help="run directory (or its timeline.h5)")
    p.add_argument("--threshold", type=float, default=1.10,
                   help="slower by at least this factor than the stage's other ranks' median (default 1.10)")
    p.add_argument("--persist", type=int, default=3, help="for at least this many consecutive steps (default 3)")
    p.add_argument("-o", "--output", metavar="FILE.png", help="draw each rank's ratio per step")
    add_size_arguments(p, DEFAULT_WIDTH, DEFAULT_HEIGHT)
    p.add_argument("--json", action="store_true", help="print the findings as one JSON object")
    p.set_defaults(func=run)
    return p


def compute_seconds(tl):
    """(steps, [ranks, steps] array of each rank's F + B + I + W seconds in each step)."""
    ev = tl.events
    steps = tl.event_steps()
    if not steps:
        raise PostError(f"{tl.path}: /events is empty (events are flushed at checkpoints and at the end of a run)")
    column = {step: i for i, step in enumerate(steps)}
    seconds = np.zeros((tl.world_size, len(steps)))
    compute = np.isin(ev["kind"], COMPUTE_KINDS)
    for rank, step, start, end in zip(ev["rank"][compute], ev["step"][compute], ev["t_start"][compute],
                                      ev["t_end"][compute]):
        seconds[int(rank), column[int(step)]] += end - start
    return steps, seconds


def peer_ratios(tl, seconds):
    """[ranks, steps] ratio of each rank's compute time to the median of its stage's other ranks
    (NaN for a rank alone at its stage)."""
    stage_of = {rank: pp for rank, (_, pp, _) in tl.rank_coords().items()}
    ratios = np.full(seconds.shape, np.nan)
    for rank in range(tl.world_size):
        peers = [r for r in range(tl.world_size) if r != rank and stage_of[r] == stage_of[rank]]
        if peers:
            ratios[rank] = seconds[rank] / np.maximum(np.median(seconds[peers], axis=0), 1e-12)
    return ratios


def episodes(steps, ratios, threshold, persist):
    """[(rank, first step, last step, median ratio)] of every run of >= persist consecutive slow steps."""
    found = []
    for rank, row in enumerate(ratios):
        slow = np.nan_to_num(row) >= threshold
        start = None
        for i, is_slow in enumerate(list(slow) + [False]):
            if is_slow and start is None:
                start = i
            elif not is_slow and start is not None:
                if i - start >= persist:
                    found.append((rank, steps[start], steps[i - 1], float(np.median(row[start:i]))))
                start = None
    return found


def draw(tl, steps, ratios, found, args):
    check_size(args.width, args.height)
    fig = new_figure(args.width, args.height)
    ax = fig.add_axes([0.17, 0.1, 0.72, 0.8])
    shown = np.nan_to_num(ratios, nan=1.0)
    spread = max(0.25, float(np.max(np.abs(shown - 1.0))))
    image = ax.imshow(shown, aspect="auto", cmap="RdBu_r", vmin=1 - spread, vmax=1 + spread, interpolation="nearest",
                      extent=(steps[0] - 0.5, steps[-1] + 0.5, tl.world_size - 0.5, -0.5))
    labels = tl.rank_labels()
    ax.set_yticks(range(tl.world_size))
    ax.set_yticklabels([labels[r] for r in range(tl.world_size)], fontsize=8)
    ax.set_xlabel("step")
    from matplotlib.patches import Rectangle  # after new_figure has chosen the Agg backend
    for rank, first, last, ratio in found:
        ax.add_patch(Rectangle((first - 0.5, rank - 0.5), last - first + 1, 1, fill=False, edgecolor="black",
                               linewidth=2))
    ax.set_title(f"{tl.name}: compute time over the stage's other ranks' median (boxed: stragglers, "
                 f">= {args.threshold:g}x for >= {args.persist} steps)", fontsize=10)
    fig.colorbar(image, cax=fig.add_axes([0.91, 0.1, 0.02, 0.8]))
    save(fig, args.output, args.width, args.height)


def report(tl, steps, found, args, alone):
    labels = tl.rank_labels()
    print(f"{tl.describe()}")
    if alone:
        print(f"  not judged (alone at their stage): ranks {', '.join(str(r) for r in alone)}")
    if not found:
        print(f"  no stragglers: no rank was {args.threshold:g}x its stage's peers for {args.persist} steps in a row")
        return
    print(f"  {'rank':<22} {'slower':>7}  steps")
    for rank, first, last, ratio in found:
        until = "to the last step" if last == steps[-1] else f"until step {last}"
        print(f"  {labels[rank]:<22} {ratio:>6.2f}x  since step {first}, {until}")


def run(args):
    if args.threshold <= 1 or args.persist < 1:
        raise PostError("--threshold must exceed 1 and --persist be at least 1")
    tl = Timeline(args.run)
    steps, seconds = compute_seconds(tl)
    ratios = peer_ratios(tl, seconds)
    found = episodes(steps, ratios, args.threshold, args.persist)
    alone = [r for r in range(tl.world_size) if np.isnan(ratios[r]).all()]
    if args.json:
        json.dump({"steps": steps, "stragglers": [{"rank": r, "since_step": a, "until_step": b, "ratio": x}
                                                  for r, a, b, x in found], "alone": alone}, sys.stdout)
        print()
    else:
        report(tl, steps, found, args, alone)
    if args.output:
        draw(tl, steps, ratios, found, args)
    return 0

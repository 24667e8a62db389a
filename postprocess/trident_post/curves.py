"""`trident-post curves RUN [RUN ...] -o FILE.png`: loss (train, and validation where the run has
[eval]), learning rate, gradient norm and tokens/s against step from /steps, several runs overlaid
(legend = run directory name). Emulated
runs compute nothing, so their loss and gradient norm are left out."""
import numpy as np

from .figure import add_size_arguments, check_size, new_figure, save
from .timeline import Timeline, unique_names

HELP = "loss, lr, grad norm, tokens/s vs step (PNG), several runs overlaid"

DEFAULT_WIDTH, DEFAULT_HEIGHT = 1400, 900
PANELS = (("loss", "loss", False), ("lr", "learning rate", False),
          ("grad_norm", "gradient norm (before clipping)", False), ("tokens_per_s", "tokens / s", False))


def add_parser(subparsers):
    p = subparsers.add_parser("curves", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Example: trident-post curves runs/1f1b runs/zb -o curves.png")
    p.add_argument("runs", metavar="RUN", nargs="+", help="run directories (or their timeline.h5 files)")
    p.add_argument("-o", "--output", metavar="FILE.png", required=True, help="PNG file to write")
    add_size_arguments(p, DEFAULT_WIDTH, DEFAULT_HEIGHT)
    p.add_argument("--log-loss", action="store_true", help="logarithmic loss axis")
    p.set_defaults(func=run)
    return p


def draw_validation(ax, tl, index):
    """The run's validation losses (the finite /steps/val_loss entries) over its training loss: dashed,
    with open circles, in the run's colour."""
    if "val_loss" not in tl.steps:
        return
    values = np.asarray(tl.steps["val_loss"], dtype=float)
    measured = np.isfinite(values)
    if measured.any():
        ax.plot(tl.step_numbers()[measured], values[measured], linestyle="--", marker="o", markersize=5,
                markerfacecolor="none", linewidth=1.1, color=f"C{index % 10}")
        ax.set_title("loss (solid: train; dashed, circles: validation)", fontsize=11)


def draw(timelines, names, output, width, height, log_loss=False):
    check_size(width, height)
    fig = new_figure(width, height)
    axes = fig.subplots(2, 2, sharex=True)
    fig.subplots_adjust(left=0.07, right=0.98, top=0.91, bottom=0.08, hspace=0.18, wspace=0.16)
    for ax, (column, title, _) in zip(axes.flat, PANELS):
        drawn = 0
        for index, (tl, name) in enumerate(zip(timelines, names)):
            if column in ("loss", "grad_norm") and tl.emulated:
                continue
            if column not in tl.steps:
                continue
            steps = tl.step_numbers()
            values = np.asarray(tl.steps[column], dtype=float)
            ax.plot(steps, values, marker="." if len(steps) <= 60 else None, markersize=4, linewidth=1.3, label=name,
                    color=f"C{index % 10}")
            if column == "loss":
                draw_validation(ax, tl, index)
            drawn += 1
        if not drawn:
            ax.text(0.5, 0.5, "no run with values" + (" (emulated runs compute no loss)"
                                                      if column in ("loss", "grad_norm") else ""),
                    transform=ax.transAxes, ha="center", va="center", color="#777777")
        if not (column == "loss" and ax.get_title()):
            ax.set_title(title, fontsize=11)
        ax.grid(color="#dddddd", linewidth=0.6)
        if column == "loss" and log_loss and drawn:
            ax.set_yscale("log")
        if column == "lr":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    from matplotlib.ticker import MaxNLocator
    for ax in axes[1]:
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    notes = [f"{n} (emulated)" if tl.emulated else n for tl, n in zip(timelines, names)]
    fig.legend(handles, [notes[names.index(lab)] for lab in labels], loc="upper center", ncol=min(len(labels), 4),
               fontsize=10, frameon=False, bbox_to_anchor=(0.5, 1.0))
    save(fig, output, width, height)


def run(args):
    timelines = [Timeline(r) for r in args.runs]
    names = unique_names(args.runs)
    draw(timelines, names, args.output, args.width, args.height, args.log_loss)
    print(f"{args.output}: {len(timelines)} run(s): {', '.join(names)} ({args.width}x{args.height} px)")
    return 0

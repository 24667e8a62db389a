"""Matplotlib figures of an exact pixel size (Agg, no display needed)."""
import struct

from .timeline import PostError

DPI = 100

# Colours by event kind, shared by the plots (compute in blues/greens as in the classic pipeline
# diagrams, waits in warm colours, collectives in purples, the optimizer in grey).
KIND_COLOURS = {
    "F": "#3b75af",
    "B": "#4e9f3d",
    "I": "#8cd17d",
    "W": "#b6992d",
    "SEND": "#e15759",
    "RECV": "#f28e2b",
    "ALLREDUCE_TP": "#d37295",
    "ALLGATHER_TP": "#fabfd2",
    "REDUCE_SCATTER_TP": "#9d4d6b",
    "RING_CP": "#59a89c",
    "ALLTOALL_EP": "#e9b44c",
    "ALLREDUCE_DP": "#7b4ea3",
    "ALLREDUCE_EMB": "#b07aa1",
    "OPTIMIZER": "#606060",
    "CKPT_BLOCKED": "#7f2704",
    "CKPT_WRITE": "#17becf",
}
OTHER_COLOUR = "#9c9c9c"
IDLE_COLOUR = "#ececec"
KIND_LABELS = {
    "F": "F forward", "B": "B backward", "I": "I input grad", "W": "W weight grad",
    "SEND": "SEND wait", "RECV": "RECV wait", "ALLREDUCE_TP": "all-reduce TP",
    "ALLGATHER_TP": "all-gather TP", "REDUCE_SCATTER_TP": "reduce-scatter TP", "RING_CP": "ring CP",
    "ALLTOALL_EP": "all-to-all EP",
    "ALLREDUCE_DP": "all-reduce DP",
    "ALLREDUCE_EMB": "all-reduce tied wte", "OPTIMIZER": "optimizer",
    "CKPT_BLOCKED": "checkpoint (training stopped)", "CKPT_WRITE": "checkpoint data written",
}


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - Debian's python3-matplotlib is a dependency
        raise PostError(f"matplotlib is not importable ({e}): install python3-matplotlib")
    return plt


def check_size(width, height):
    for name, value in (("--width", width), ("--height", height)):
        if value is not None and not 64 <= value <= 20000:
            raise PostError(f"{name} {value}: give a size in pixels between 64 and 20000")


def add_size_arguments(parser, width, height):
    """--width and --height of a command's picture, with its defaults in pixels."""
    parser.add_argument("--width", type=int, default=width, help=f"image width in pixels (default {width})")
    parser.add_argument("--height", type=int, default=height, help=f"image height in pixels (default {height})")


def new_figure(width, height):
    plt = pyplot()
    return plt.figure(figsize=(width / DPI, height / DPI), dpi=DPI)


def save(fig, path, width, height):
    """Saves `fig` as a PNG of exactly width x height pixels (no tight bounding box)."""
    plt = pyplot()
    try:
        fig.savefig(path, dpi=DPI, format="png")
    except OSError as e:
        raise PostError(f"cannot write {path}: {e.strerror or e}")
    finally:
        plt.close(fig)
    size = png_size(path)
    if size != (width, height):  # pragma: no cover - matplotlib rounds; keep the promise visible
        raise PostError(f"{path}: wrote {size[0]}x{size[1]} pixels instead of {width}x{height}")


def png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise PostError(f"{path}: not a PNG file")
    return struct.unpack(">II", head[16:24])

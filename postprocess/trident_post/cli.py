"""The `trident-post` command line: one subcommand per module."""
import argparse
import importlib
import sys

from . import __version__
from .timeline import PostError

SUBCOMMANDS = ("gantt", "bubble", "trace", "curves", "ckpt", "export", "compare")

DESCRIPTION = """Post-processing for trident runs. RUN is a run directory (the deck's output.dir, holding
timeline.h5 and checkpoints/) or a timeline.h5 file."""

EPILOG = """examples:
  trident-post gantt   runs/tiny -o gantt.png            pipeline diagram of the last step
  trident-post bubble  runs/tiny                         busy/idle per stage, bubble vs theory
  trident-post trace   runs/tiny -o trace.json           open in https://ui.perfetto.dev
  trident-post curves  runs/a runs/b -o curves.png       loss, lr, grad norm, tokens/s
  trident-post ckpt    runs/tiny/checkpoints/step_00000020.h5
  trident-post ckpt --to-torch runs/tiny/checkpoints/step_00000020.h5 model.pt
  trident-post export  runs/llama-tiny -o llama-hf          Hugging Face folder (from_pretrained)
  trident-post compare runs/a runs/b

exit codes: 0 success, 1 a checkpoint fails its checksum, 2 bad arguments or a missing /
unreadable / non-trident file. `trident-post COMMAND --help` describes each command."""


def build_parser():
    parser = argparse.ArgumentParser(prog="trident-post", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"trident-post {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in SUBCOMMANDS:
        importlib.import_module(f".{name}", __package__).add_parser(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PostError as e:
        print(f"trident-post {args.command}: error: {e}", file=sys.stderr)
        return e.code
    except BrokenPipeError:  # `trident-post ckpt X | head`
        return 0
    except KeyboardInterrupt:
        return 130

"""The `trident-post` command line: one subcommand per module."""
import sys

from command_line import subcommand_parser

from . import __version__
from .timeline import PostError

SUBCOMMANDS = ("gantt", "bubble", "trace", "curves", "stragglers", "ckpt", "export", "hf_import", "compare")

DESCRIPTION = """Post-processing for trident runs. RUN is a run directory (the deck's output.dir, holding
timeline.h5 and checkpoints/) or a timeline.h5 file."""

EPILOG = """examples:
  trident-post gantt   runs/tiny -o gantt.png            pipeline diagram of the last step
  trident-post bubble  runs/tiny                         busy/idle per stage, bubble vs theory
  trident-post trace   runs/tiny -o trace.json           open in https://ui.perfetto.dev
  trident-post curves  runs/a runs/b -o curves.png       loss, lr, grad norm, tokens/s
  trident-post stragglers runs/big -o s.png              ranks slower than their stage's peers
  trident-post ckpt    runs/tiny/checkpoints/step_00000020.h5
  trident-post ckpt --to-torch runs/tiny/checkpoints/step_00000020.h5 model.pt
  trident-post export  runs/llama-tiny -o llama-hf          Hugging Face folder (from_pretrained)
  trident-post import  llama-hf --deck DECK --out init.h5  step-0 checkpoint (checkpoint.init)
  trident-post compare runs/a runs/b

exit codes: 0 success, 1 a checkpoint fails its checksum, 2 bad arguments or a missing /
unreadable / non-trident file. `trident-post COMMAND --help` describes each command."""


def build_parser():
    return subcommand_parser("trident-post", DESCRIPTION, EPILOG, __version__, __package__, SUBCOMMANDS)


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

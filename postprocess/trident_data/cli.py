"""The `trident-data` command line: one subcommand per module."""
import sys

from command_line import subcommand_parser

from . import DataError, __version__

SUBCOMMANDS = ("tokenizer", "encode", "decode")

DESCRIPTION = """Prepares a text corpus for trident: trains a SentencePiece BPE tokenizer, encodes text into
llm.c token shards (uint16, or uint32 past 65,536 tokens) with a validation split by document, and
decodes shards back into text. Memory stays bounded whatever the corpus size."""

EPILOG = """examples:
  trident-data tokenizer corpus/*.txt --vocab-size 8000 -o data/tok
  trident-data encode corpus/*.txt --tokenizer data/tok.model --val-fraction 0.01 -o data --name corpus
  trident-data decode data/corpus_val_000000.bin --tokenizer data/tok.model --count 100

then in the deck: [data] kind = "bin", path = "data/corpus_train_*.bin"; [eval] path =
"data/corpus_val_*.bin"; model.vocab = the tokenizer's size.

exit codes: 0 success, 2 bad input (missing file, empty corpus, a vocabulary that does not fit).
`trident-data COMMAND --help` describes each command."""


def build_parser():
    return subcommand_parser("trident-data", DESCRIPTION, EPILOG, __version__, __package__, SUBCOMMANDS)


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DataError as e:
        print(f"trident-data {args.command}: error: {e}", file=sys.stderr)
        return e.code
    except BrokenPipeError:  # `trident-data decode ... | head`
        return 0
    except KeyboardInterrupt:
        return 130

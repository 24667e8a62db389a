"""`trident-data decode`: tokens of a shard back into text, to check what trident will read. End of
document tokens show as a line "<end of document>"."""
from . import DataError
from .shards import read_shard
from .tokenizer import load

HELP = "print a window of a token shard as text"


def add_parser(subparsers):
    p = subparsers.add_parser("decode", help=HELP, description=__doc__.replace("`", ""),
                              epilog="Example: trident-data decode data/fortunes_val_000000.bin "
                                     "--tokenizer data/fortunes.model --count 200")
    p.add_argument("shard", metavar="SHARD", help="an llm.c token shard (.bin)")
    p.add_argument("--tokenizer", metavar="MODEL", required=True, help="the SentencePiece .model it was encoded with")
    p.add_argument("--start", type=int, default=0, help="first token (default 0)")
    p.add_argument("--count", type=int, default=256, help="tokens to decode (default 256)")
    p.set_defaults(func=run)


def run(args):
    tokens = read_shard(args.shard)
    processor = load(args.tokenizer)
    if not 0 <= args.start <= len(tokens) or args.count < 0:
        raise DataError(f"--start {args.start} / --count {args.count} lie outside the shard's {len(tokens)} tokens")
    window = [int(t) for t in tokens[args.start:args.start + args.count]]
    if window and max(window) >= processor.vocab_size():
        raise DataError(f"{args.shard}: token id {max(window)} is not in the tokenizer's {processor.vocab_size()} "
                        f"tokens: it was encoded with another tokenizer")
    pieces, document = [], []
    for token in window:
        if token == processor.eos_id():
            pieces.append(processor.decode(document) + "\n<end of document>\n")
            document = []
        else:
            document.append(token)
    pieces.append(processor.decode(document))
    print("".join(pieces))
    return 0

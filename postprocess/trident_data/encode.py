"""`trident-data encode`: text -> llm.c token shards for trident (data.kind = "bin"), streaming: one
document (or a piece of a large one) in memory at a time plus one shard's buffer. Each document is tokenized and followed by
the end-of-document token; whole documents go to the validation split with probability
--val-fraction (a seeded draw per document, in corpus order), the rest to training. Shards of
--shard-tokens tokens are written as NAME_train_000000.bin, NAME_val_000000.bin, ..., each under a
temporary name first; if encoding fails, the shards it wrote are removed. NAME.toml, written last,
is the deck's part that reads them: model.vocab, [data] with the end-of-document token and packed
documents masked (data.eod_token, data.document_mask), [eval] on the validation shards."""
import sys
import time
from pathlib import Path

import numpy as np

from . import DataError
from .documents import add_corpus_arguments, check_files, documents
from .shards import token_dtype, write_shard
from .tokenizer import check_deck_vocab, load

HELP = "encode text files into train/val token shards with a SentencePiece tokenizer"


def add_parser(subparsers):
    p = subparsers.add_parser("encode", help=HELP, description=__doc__.replace("`", ""),
                              epilog="Example: trident-data encode /usr/share/games/fortunes/* --separator % "
                                     "--tokenizer data/fortunes.model --val-fraction 0.05 -o data --name fortunes")
    add_corpus_arguments(p)
    p.add_argument("--tokenizer", metavar="MODEL", required=True,
                   help="a SentencePiece .model, or a Hugging Face model folder holding one (tokenizer.model)")
    p.add_argument("-o", "--output", metavar="DIR", required=True, help="directory for the shards")
    p.add_argument("--name", default="corpus", help="shard name prefix (default corpus)")
    p.add_argument("--val-fraction", type=float, default=0.0,
                   help="share of the documents held out for validation (default 0)")
    p.add_argument("--shard-tokens", type=int, default=100_000_000, help="tokens per shard (default 100,000,000)")
    p.add_argument("--seed", type=int, default=1234, help="seed of the validation draw (default 1234)")
    p.add_argument("--deck", metavar="DECK", help="check that the deck's model.vocab holds the tokenizer's ids")
    p.set_defaults(func=run)


class SplitWriter:
    """One split's shards: fills a buffer of shard_tokens tokens and writes it when full."""

    def __init__(self, directory, name, split, shard_tokens, dtype):
        self.directory, self.prefix = directory, f"{name}_{split}"
        self.buffer = np.empty(shard_tokens, dtype=dtype)
        self.used = 0
        self.written = []
        self.tokens = 0

    def add(self, ids):
        ids = np.asarray(ids, dtype=self.buffer.dtype)
        while len(ids):
            take = min(len(ids), len(self.buffer) - self.used)
            self.buffer[self.used:self.used + take] = ids[:take]
            self.used += take
            ids = ids[take:]
            if self.used == len(self.buffer):
                self.flush()

    def flush(self):
        if self.used == 0:
            return
        path = self.directory / f"{self.prefix}_{len(self.written):06d}.bin"
        write_shard(path, self.buffer[:self.used], self.buffer.dtype)
        self.written.append(path)
        self.tokens += self.used
        self.used = 0

    def remove(self):
        for path in self.written:
            path.unlink(missing_ok=True)


class Progress:
    """A progress bar on stderr: redrawn in place twice a second on a terminal, a line every 10 s in a
    batch job's log; the last state always ends with a newline."""

    def __init__(self, total_chars):
        self.total, self.chars, self.documents, self.tokens = max(total_chars, 1), 0, 0, 0
        self.start = self.shown = time.perf_counter()
        self.terminal = sys.stderr.isatty()

    def update(self, chars, tokens, ends_document=False, final=False):
        self.chars += chars
        self.tokens += tokens
        self.documents += 1 if ends_document else 0
        now = time.perf_counter()
        if final or now - self.shown >= (0.5 if self.terminal else 10.0):
            self.shown = now
            rate = self.tokens / max(now - self.start, 1e-9)
            done = min(self.chars / self.total, 1.0)
            bar = "#" * int(30 * done)
            redraw = "\r" if self.terminal else ""
            print(f"{redraw}encode [{bar:<30}] {100 * done:3.0f}%  {self.documents:,} documents  "
                  f"{self.tokens:,} tokens  {rate:,.0f} tokens/s", end="\n" if final or not self.terminal else "",
                  file=sys.stderr, flush=True)


def run(args):
    if not 0.0 <= args.val_fraction < 1.0:
        raise DataError(f"--val-fraction {args.val_fraction} must be in [0, 1)")
    if args.shard_tokens < 1:
        raise DataError("--shard-tokens must be at least 1")
    paths = check_files(args.inputs)
    processor = load(args.tokenizer)
    if args.deck:
        check_deck_vocab(args.deck, processor.vocab_size())
    directory = Path(args.output)
    directory.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype(processor.vocab_size())
    splits = {name: SplitWriter(directory, args.name, name, args.shard_tokens, dtype) for name in ("train", "val")}
    try:
        encode_documents(args, paths, processor, splits)
    except BaseException:
        for split in splits.values():
            split.remove()
        raise
    for name, split in splits.items():
        if split.written:
            print(f"{name}: {split.tokens:,} tokens in {len(split.written)} shard(s) "
                  f"({dtype.name}): {split.written[0]}{' ...' if len(split.written) > 1 else ''}")
    print(f"deck: {write_deck(directory, args.name, processor, bool(splits['val'].written))} "
          "(its [data] and [eval] sections and model.vocab, to copy into a deck)")
    return 0


def write_deck(directory, name, processor, validation):
    """NAME.toml: the sections of a deck that trains on these shards (paths relative to it)."""
    lines = ["# Written by trident-data encode: the part of a deck that trains on these shards.",
             "[model]", f"vocab = {processor.vocab_size()}", "",
             "[data]", 'kind = "bin"', f'path = "{name}_train_*.bin"',
             f"eod_token = {processor.eos_id()}  # ends each document", "document_mask = true  # packed documents"]
    if validation:
        lines += ["", "[eval]", f'path = "{name}_val_*.bin"']
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def encode_documents(args, paths, processor, splits):
    draw = np.random.default_rng(args.seed)
    end_of_document = processor.eos_id()
    progress = Progress(sum(p.stat().st_size for p in paths))
    split = None  # of the document in progress: all its pieces go to one split
    for _, text, ends_document in documents(paths, args.jsonl_field, args.separator):
        split = split or ("val" if draw.random() < args.val_fraction else "train")
        ids = processor.encode(text)
        if ends_document:
            ids.append(end_of_document)
        splits[split].add(ids)
        progress.update(len(text), len(ids), ends_document)
        split = None if ends_document else split
    progress.update(0, 0, final=True)
    for split in splits.values():
        split.flush()
    if not splits["train"].written:
        raise DataError(f"no text to encode in {', '.join(map(str, paths))}")
    if args.val_fraction > 0 and not splits["val"].written:
        raise DataError(f"no document fell into the validation split (--val-fraction {args.val_fraction} of "
                        f"{progress.documents} documents); raise --val-fraction or add documents")

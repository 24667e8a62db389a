"""`trident-data tokenizer`: a SentencePiece BPE tokenizer trained on the user's text (Debian's
python3-sentencepiece), with byte fallback so that any text encodes, and the ids the encoder relies
on: 0 <unk>, 1 <s>, 2 </s> (the end-of-document token)."""
import tomllib
from pathlib import Path

from . import DataError
from .documents import add_corpus_arguments, check_files, documents

HELP = "train a SentencePiece BPE tokenizer on text files (-> PREFIX.model, PREFIX.vocab)"
END_OF_DOCUMENT = "</s>"


def add_parser(subparsers):
    p = subparsers.add_parser("tokenizer", help=HELP, description=__doc__.replace("`", ""),
                              epilog="Example: trident-data tokenizer /usr/share/games/fortunes/* "
                                     "--separator % --vocab-size 2000 -o data/fortunes")
    add_corpus_arguments(p)
    p.add_argument("-o", "--output", metavar="PREFIX", required=True,
                   help="writes PREFIX.model and PREFIX.vocab")
    p.add_argument("--vocab-size", type=int, required=True, help="tokens in the vocabulary (the deck's model.vocab)")
    p.add_argument("--max-sentences", type=int, default=2_000_000,
                   help="lines of text the trainer reads at most, which bounds its memory (default 2,000,000)")
    p.set_defaults(func=run)


def training_lines(paths, field, separator, limit):
    """The corpus' non-blank lines, at most `limit`, as SentencePiece's training sentences."""
    count = 0
    for _, text, _ in documents(paths, field, separator):
        for line in text.splitlines():
            if line.strip():
                yield line
                count += 1
                if count >= limit:
                    return


def run(args):
    import sentencepiece as spm

    paths = check_files(args.inputs)
    if args.vocab_size < 260:
        raise DataError(f"--vocab-size {args.vocab_size} is too small: the 256 byte-fallback pieces and 3 special "
                        f"tokens need 259; use at least 260")
    lines = training_lines(paths, args.jsonl_field, args.separator, args.max_sentences)
    first = next(lines, None)
    if first is None:
        raise DataError(f"no text in {', '.join(map(str, paths))}")
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=_chain(first, lines), model_prefix=str(output), vocab_size=args.vocab_size,
            model_type="bpe", byte_fallback=True, character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            minloglevel=2)
    except RuntimeError as e:
        raise DataError(f"SentencePiece could not train a {args.vocab_size}-token vocabulary on this text: "
                        f"{str(e).strip()} (a smaller --vocab-size fits a small corpus)") from None
    print(f"{output}.model: {args.vocab_size} tokens (BPE, byte fallback; end of document = {END_OF_DOCUMENT}, "
          f"id 2)")
    return 0


def _chain(first, rest):
    yield first
    yield from rest


def load(path):
    """The SentencePiece model at `path`, or in the Hugging Face model folder `path` (its
    tokenizer.model), with its end-of-document id."""
    import sentencepiece as spm

    if Path(path).is_dir():
        path = hf_tokenizer(Path(path))
    if not Path(path).is_file():
        raise DataError(f"no such tokenizer: {path}")
    processor = spm.SentencePieceProcessor()
    try:
        processor.Load(str(path))
    except (OSError, RuntimeError):
        raise DataError(f"{path}: not a SentencePiece model") from None
    if processor.eos_id() < 0:
        raise DataError(f"{path}: the tokenizer has no end-of-sentence token to separate documents with")
    return processor


def hf_tokenizer(folder):
    """A Hugging Face folder's SentencePiece model (Llama 2, Mistral, Mixtral ship tokenizer.model)."""
    if (folder / "tokenizer.model").is_file():
        return folder / "tokenizer.model"
    found = ", ".join(sorted(p.name for p in folder.glob("tokenizer*"))) or "no tokenizer files"
    raise DataError(f"{folder}: no tokenizer.model (SentencePiece) in this folder ({found}); trident-data reads "
                    "SentencePiece models: give one, or train one with `trident-data tokenizer`")


def check_deck_vocab(deck, vocab_size):
    """A deck whose model.vocab is smaller than the tokenizer's vocabulary cannot embed its ids."""
    try:
        with open(deck, "rb") as f:
            model = tomllib.load(f).get("model", {})
    except FileNotFoundError:
        raise DataError(f"no such deck: {deck}") from None
    except tomllib.TOMLDecodeError as e:
        raise DataError(f"{deck}: invalid TOML ({e})") from None
    deck_vocab = model.get("vocab")
    if not isinstance(deck_vocab, int) or deck_vocab < vocab_size:
        raise DataError(f"{deck}: model.vocab = {deck_vocab} but the tokenizer has {vocab_size} tokens; set "
                        f"model.vocab = {vocab_size} in the deck (or train the tokenizer with --vocab-size "
                        f"{deck_vocab})")

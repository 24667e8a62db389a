"""trident-data on a real English corpus (Debian's `fortunes` files, "%" between fortunes), then
trident on its shards: the shortened version of README "A real corpus, end to end".

- The shards hold, token for token, each fortune as SentencePiece encodes it (the test encodes them
  itself) followed by the end-of-document id, in corpus order; they are cut at --shard-tokens.
- With a validation split every fortune lands whole in exactly one split, and decode gives the text.
- Bad input is one line and exit 2, and a failed encode leaves no shard behind.
- A small Llama trains on the shards on two pipeline ranks, with both losses falling.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm  # python3-sentencepiece: scripts/setup installs it

from conftest import REPO, read_steps

TOOL = REPO / "postprocess" / "trident-data"
FORTUNES = Path("/usr/share/games/fortunes")
FILES = [FORTUNES / name for name in ("computers", "science", "wisdom")]
VOCAB = 512

# scripts/setup --tests installs the fortunes package: a missing one fails the tests rather than skipping them.
assert all(f.is_file() for f in FILES), f"missing {[str(f) for f in FILES if not f.is_file()]}: run scripts/setup --tests"


def tool(*args, expect=0):
    proc = subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == expect, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def fortunes():
    """Every non-blank fortune of FILES in order, split here on lines equal to "%"."""
    documents = []
    for path in FILES:
        for text in path.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
            text = text + "\n" if not text.endswith("\n") else text
            if text.strip() and text.strip() != "%":
                documents.append(text)
    return documents


def shard_tokens(path):
    header = np.fromfile(path, dtype="<i4", count=256)
    assert (header[0], header[1]) == (20240520, 1), "a 512-token vocabulary fits uint16"
    tokens = np.fromfile(path, dtype="<u2", offset=1024)
    assert len(tokens) == header[2]
    return tokens


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("tok") / "fortunes"
    tool("tokenizer", *FILES, "--separator", "%", "--vocab-size", VOCAB, "-o", prefix)
    return prefix.with_suffix(".model")


def test_shards_hold_every_fortune_token_for_token(tokenizer, tmp_path):
    tool("encode", *FILES, "--separator", "%", "--tokenizer", tokenizer, "-o", tmp_path, "--name", "f",
         "--shard-tokens", 20000)
    shards = sorted(tmp_path.glob("f_train_*.bin"))
    assert len(shards) > 1 and not list(tmp_path.glob("f_val_*"))
    assert all(len(shard_tokens(s)) == 20000 for s in shards[:-1])
    processor = spm.SentencePieceProcessor(model_file=str(tokenizer))
    expected = np.concatenate([processor.encode(text) + [processor.eos_id()] for text in fortunes()])
    np.testing.assert_array_equal(np.concatenate([shard_tokens(s) for s in shards]), expected)


def test_validation_split_keeps_fortunes_whole_and_decodes(tokenizer, tmp_path):
    tool("encode", *FILES, "--separator", "%", "--tokenizer", tokenizer, "-o", tmp_path, "--name", "f",
         "--val-fraction", "0.2")
    processor = spm.SentencePieceProcessor(model_file=str(tokenizer))
    eos = processor.eos_id()
    split_documents = {}
    for split in ("train", "val"):
        tokens = np.concatenate([shard_tokens(s) for s in sorted(tmp_path.glob(f"f_{split}_*.bin"))])
        assert tokens[-1] == eos
        ends = np.flatnonzero(tokens == eos)
        split_documents[split] = [processor.decode(tokens[a + 1:b].tolist()) for a, b in zip(np.r_[-1, ends[:-1]], ends)]
    everything = [processor.decode(processor.encode(text)) for text in fortunes()]
    train, val = split_documents["train"], split_documents["val"]
    assert len(train) + len(val) == len(everything) and 0.1 < len(val) / len(everything) < 0.3
    assert sorted(train + val) == sorted(everything)
    shard = sorted(tmp_path.glob("f_val_*.bin"))[0]
    decoded = tool("decode", shard, "--tokenizer", tokenizer, "--count", 400).stdout
    assert val[0].strip()[:40] in decoded and "<end of document>" in decoded


def test_encode_writes_the_deck_that_reads_its_shards(tokenizer, tmp_path):
    """NAME.toml names the shards, the tokenizer's vocabulary and its end-of-document token, with
    packed documents masked: trident accepts it, and a short run trains on the fortunes with it."""
    tool("encode", *FILES, "--separator", "%", "--tokenizer", tokenizer, "-o", tmp_path, "--name", "f",
         "--val-fraction", "0.2")
    processor = spm.SentencePieceProcessor(model_file=str(tokenizer))
    deck = (tmp_path / "f.toml").read_text()
    for line in (f"vocab = {processor.vocab_size()}", 'path = "f_train_*.bin"', 'path = "f_val_*.bin"',
                 f"eod_token = {processor.eos_id()}", "document_mask = true"):
        assert line in deck, line
    run = subprocess.run([os.environ["TRIDENT_EXE"], "run", str(tmp_path / "f.toml"), "--set", "train.steps=2",
                          "--set", "model.seq_len=32", "--set", f"output.dir={tmp_path / 'run'}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert np.all(np.isfinite(read_steps(tmp_path / "run")["loss"]))


def test_a_hugging_face_folder_gives_its_tokenizer_models_shards(tokenizer, tmp_path):
    """--tokenizer DIR reads DIR/tokenizer.model, as Hugging Face lays out Llama 2's and Mixtral's."""
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "tokenizer.model").write_bytes(tokenizer.read_bytes())
    (folder / "config.json").write_text("{}")
    for name, source in (("direct", tokenizer), ("folder", folder)):
        tool("encode", FILES[0], "--separator", "%", "--tokenizer", source, "-o", tmp_path / name, "--name", "f")
    direct, from_folder = sorted((tmp_path / "direct").glob("*.bin")), sorted((tmp_path / "folder").glob("*.bin"))
    assert len(direct) == len(from_folder) > 0
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(direct, from_folder))


@pytest.mark.parametrize("case, message", [
    ("missing_file", "no such file"),
    ("empty_corpus", "no text"),
    ("vocab_too_small", "too small"),
    ("deck_vocab_smaller", "model.vocab = 256"),
    ("bad_jsonl_midway", "not a JSON object"),
    ("hf_folder_without_sentencepiece", "no tokenizer.model"),
])
def test_bad_input_is_one_line_exit_2_and_leaves_no_shard(tokenizer, tmp_path, case, message):
    out = tmp_path / "out"
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    deck = tmp_path / "deck.toml"
    deck.write_text("[model]\nvocab = 256\n")
    broken = tmp_path / "docs.jsonl"
    broken.write_text('{"text": "a fortune"}\n' * 3000 + "not json\n")
    hf_folder = tmp_path / "hf"
    hf_folder.mkdir()
    (hf_folder / "tokenizer.json").write_text("{}")
    encode = ("encode", "--tokenizer", tokenizer, "-o", out, "--shard-tokens", 1000)
    args = {
        "missing_file": encode + (tmp_path / "nowhere.txt",),
        "empty_corpus": encode + (empty,),
        "vocab_too_small": ("tokenizer", FILES[0], "--vocab-size", 100, "-o", tmp_path / "tiny"),
        "deck_vocab_smaller": encode + (FILES[0], "--deck", deck),
        "bad_jsonl_midway": encode + (broken,),
        "hf_folder_without_sentencepiece": ("encode", "--tokenizer", hf_folder, "-o", out, FILES[0]),
    }[case]
    proc = tool(*args, expect=2)
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("encode [")]  # the progress bar
    assert len(errors) == 1 and message in errors[0] and errors[0].startswith("trident-data"), proc.stderr
    assert not list(out.glob("*.bin*")) if out.exists() else True


def test_a_small_llama_learns_the_fortunes_on_two_ranks(tokenizer, tmp_path, trident_run):
    tool("encode", *FILES, "--separator", "%", "--tokenizer", tokenizer, "-o", tmp_path, "--name", "f",
         "--val-fraction", "0.05")
    shortened = ("parallel.pp=2", f"model.vocab={VOCAB}", "model.layers=2", "model.d_model=64", "model.ffn_hidden=192",
                 "model.seq_len=64", "train.steps=40", "train.warmup_steps=5", "eval.every=20", "eval.batches=2",
                 f"data.path={tmp_path}/f_train_*.bin", f"eval.path={tmp_path}/f_val_*.bin", "output.log_every=20")
    _, run_dir = trident_run(*shortened, ranks=2, deck=REPO / "input_decks" / "fortunes-llama.toml")
    steps = read_steps(run_dir)
    val = steps["val_loss"][np.isfinite(steps["val_loss"])]
    assert len(val) == 2 and val[-1] < val[0] < np.log(VOCAB), val
    assert steps["loss"][-5:].mean() < steps["loss"][:5].mean() - 0.5, steps["loss"]


@pytest.mark.parametrize("command", ["", "tokenizer", "encode", "decode"])
def test_every_command_has_help(command):
    text = tool(*([command] if command else []), "--help").stdout
    assert "usage: trident-data" in text
    assert ("Example" if command else "examples:") in text


def test_a_file_larger_than_a_piece_is_one_document(tokenizer, tmp_path, monkeypatch):
    """A whole-file document is read in pieces cut at line ends (so a huge file never sits in
    memory), all in one split, with one end-of-document token at its end."""
    sys.path.insert(0, str(REPO / "postprocess"))
    from trident_data import cli, documents

    monkeypatch.setattr(documents, "CHUNK_CHARS", 4096)
    book = tmp_path / "book.txt"
    book.write_text("\n\n" + "".join(f.read_text(encoding="utf-8", errors="replace") for f in FILES))
    pieces = list(documents.documents([book]))
    assert len(pieces) > 10 and [ends for _, _, ends in pieces] == [False] * (len(pieces) - 1) + [True]
    assert all(text.endswith("\n") for _, text, _ in pieces)
    assert "".join(text for _, text, _ in pieces) == book.read_text(encoding="utf-8").lstrip("\n")
    other = tmp_path / "other.txt"
    other.write_text("A second, short document.\n")
    # Seed 8 draws 0.327 then 0.987: the book goes to validation, the short document to training.
    assert cli.main(["encode", str(book), str(other), "--tokenizer", str(tokenizer), "-o", str(tmp_path),
                     "--name", "book", "--val-fraction", "0.5", "--seed", "8"]) == 0
    val = shard_tokens(tmp_path / "book_val_000000.bin")
    train = shard_tokens(tmp_path / "book_train_000000.bin")
    assert np.flatnonzero(val == 2).tolist() == [len(val) - 1] and len(val) > 10 * len(train)
    assert np.flatnonzero(train == 2).tolist() == [len(train) - 1]

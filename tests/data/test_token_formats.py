"""Token files written here with numpy, following each format's published layout (independently of
trident's readers), then trained on: the same tokens stored as one llm.c shard (uint16), as the
32-bit llm.c variant, split over several shards named by a glob, or as a Megatron-LM indexed
dataset (int32 and uint16) must give bitwise the same losses, since they are one token stream.

Layouts: llm.c dev/data/data_common.py (256 x int32 header: magic 20240520 version 1 for uint16,
20240801 version 7 for uint32, token count); Megatron-LM megatron/core/datasets/indexed_dataset.py
(.idx: b"MMIDIDX\\0\\0", <Q version 1, <B dtype code, <Q sequence count, <Q document count, int32
lengths, int64 byte pointers, int64 document indices; .bin: the sequences back to back).
"""
import struct

import numpy as np
import pytest

from conftest import read_steps

STEPS = 3
SMALL = ("model.layers=1", "model.d_model=32", "model.heads=2", "model.seq_len=16", "model.vocab=256",
         "schedule.microbatches=2", "schedule.micro_batch_size=2", f"train.steps={STEPS}", "output.log_every=1")
MEGATRON_DTYPE_CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.float64: 6,
                        np.float32: 7, np.uint16: 8}


def write_llmc(path, tokens, magic=20240520, version=1, dtype=np.uint16):
    header = np.zeros(256, dtype="<i4")
    header[:3] = magic, version, len(tokens)
    path.write_bytes(header.tobytes() + np.asarray(tokens, dtype=dtype).tobytes())
    return path


def write_megatron(prefix, documents, dtype=np.int32, version=1, dtype_code=None):
    """One sequence per document, as preprocess_data.py writes them (documents = sequences)."""
    lengths = np.array([len(d) for d in documents], dtype="<i4")
    pointers = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype("<i8") * np.dtype(dtype).itemsize
    document_indices = np.arange(len(documents) + 1, dtype="<i8")
    code = MEGATRON_DTYPE_CODES[dtype] if dtype_code is None else dtype_code
    index = (b"MMIDIDX\x00\x00" + struct.pack("<Q", version) + struct.pack("<B", code)
             + struct.pack("<Q", len(documents)) + struct.pack("<Q", len(document_indices))
             + lengths.tobytes() + pointers.tobytes() + document_indices.tobytes())
    prefix.with_name(prefix.name + ".idx").write_bytes(index)
    prefix.with_name(prefix.name + ".bin").write_bytes(np.concatenate(documents).astype(dtype).tobytes())
    return prefix


@pytest.fixture(scope="module")
def corpus():
    """Documents of uneven length over a 256-token vocabulary, with structure to learn."""
    rng = np.random.default_rng(17)
    documents = []
    for length in rng.integers(20, 200, size=12):
        start = rng.integers(0, 256)
        documents.append(((start + np.arange(length) * 7 + rng.integers(0, 3, size=length)) % 256).astype(np.int64))
    return documents


def losses(trident_run, kind, path):
    _, run_dir = trident_run(*SMALL, f"data.kind={kind}", f"data.path={path}")
    return read_steps(run_dir)["loss"]


def test_every_storage_of_one_stream_trains_alike(trident_run, tmp_path, corpus):
    tokens = np.concatenate(corpus)
    reference = losses(trident_run, "bin", write_llmc(tmp_path / "one.bin", tokens))
    assert len(reference) == STEPS and np.all(np.isfinite(reference))

    wide = write_llmc(tmp_path / "wide.bin", tokens, magic=20240801, version=7, dtype=np.uint32)
    shards = tmp_path / "shards"
    shards.mkdir()
    for i, part in enumerate(np.array_split(tokens, 3)):
        write_llmc(shards / f"train_{i:03d}.bin", part)
    stored = {
        "llm.c uint32": losses(trident_run, "bin", wide),
        "three shards by glob": losses(trident_run, "bin", shards / "train_*.bin"),
        "Megatron int32": losses(trident_run, "megatron", write_megatron(tmp_path / "corpus_int32", corpus)),
        "Megatron uint16": losses(trident_run, "megatron",
                                  write_megatron(tmp_path / "corpus_uint16", corpus, dtype=np.uint16)),
    }
    for name, got in stored.items():
        np.testing.assert_array_equal(got, reference, err_msg=name)


def test_shards_are_read_in_sorted_order(trident_run, tmp_path, corpus):
    tokens = np.concatenate(corpus)
    reference = losses(trident_run, "bin", write_llmc(tmp_path / "one.bin", tokens))
    first, second = np.array_split(tokens, 2)
    write_llmc(tmp_path / "part_b.bin", second)
    write_llmc(tmp_path / "part_a.bin", first)
    listed = f'["{tmp_path / "part_b.bin"}", "{tmp_path / "part_a.bin"}"]'  # a TOML array, given unsorted
    np.testing.assert_array_equal(losses(trident_run, "bin", listed), reference)


@pytest.mark.parametrize("change, message", [
    ({"dtype_code": 7}, "floating-point"),
    ({"dtype_code": 9}, "unknown"),
    ({"version": 2}, "unsupported index version 2"),
])
def test_bad_megatron_index_is_rejected(trident_run, tmp_path, corpus, change, message):
    prefix = write_megatron(tmp_path / "bad", corpus, **change)
    proc, _ = trident_run(*SMALL, "data.kind=megatron", f"data.path={prefix}", expect=2)
    assert message in proc.stderr and "bad.idx" in proc.stderr, proc.stderr


def test_token_beyond_the_vocabulary_names_file_and_position(trident_run, tmp_path, corpus):
    tokens = np.concatenate(corpus)
    tokens[5] = 300
    path = write_llmc(tmp_path / "big_ids.bin", tokens)
    proc, _ = trident_run(*SMALL, "data.kind=bin", f"data.path={path}", expect=2)
    assert "big_ids.bin" in proc.stderr and "token id 300 at position 5" in proc.stderr, proc.stderr

"""llm.c token shards (DESIGN.md "Token data"): a header of 256 little-endian int32 (magic, version,
token count), then the tokens; uint16 (magic 20240520, version 1) while the vocabulary fits, else
uint32 (magic 20240801, version 7), as llm.c's dev/data/data_common.py writes them."""
import os
from pathlib import Path

import numpy as np

from . import DataError

HEADER_INTS = 256
VARIANTS = {np.dtype("<u2"): (20240520, 1), np.dtype("<u4"): (20240801, 7)}


def token_dtype(vocab_size):
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def write_shard(path, tokens, dtype):
    """Writes under a temporary name and renames: a shard never exists half-written under its name."""
    magic, version = VARIANTS[dtype]
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:3] = magic, version, len(tokens)
    partial = Path(f"{path}.partial")
    with open(partial, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=dtype).tobytes())
    os.replace(partial, path)


def read_shard(path):
    """The tokens of a shard, memory-mapped."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no such file: {path}")
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    for dtype, (magic, version) in VARIANTS.items():
        if len(header) == HEADER_INTS and (header[0], header[1]) == (magic, version):
            count = int(header[2])
            if path.stat().st_size != HEADER_INTS * 4 + count * dtype.itemsize:
                raise DataError(f"{path}: the header's {count} tokens do not match the file's size")
            return np.memmap(path, dtype=dtype, mode="r", offset=HEADER_INTS * 4, shape=(count,))
    raise DataError(f"{path}: not an llm.c token shard (magic 20240520 v1 or 20240801 v7)")

"""The safetensors format (https://github.com/huggingface/safetensors), read and written with numpy:
8 bytes of little-endian header length N, N bytes of JSON (tensor name -> dtype, shape, data_offsets
relative to the end of the header; an optional "__metadata__" of strings), then the raw little-endian
row-major data. bf16 is widened to float32 exactly on reading and rounded to nearest even on writing."""
import json
import struct
from pathlib import Path

import numpy as np

from .timeline import PostError

# The dtypes whose values become float32 exactly (or, for F64, by rounding): the weights' dtypes.
FLOAT_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}
ELEMENT_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                 "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
HEADER_LIMIT = 100 << 20  # the reference implementation refuses larger headers too


def bf16_to_float32(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def float32_to_bf16(values):
    """Round to nearest even, as torch's .to(torch.bfloat16) does for finite values."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return rounded.astype(np.uint16)


class SafetensorsFile:
    """A safetensors file's header, validated, and its tensors read on demand (memory-mapped)."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise PostError(f"{self.path}: {size} bytes, shorter than a safetensors header length (8 bytes)")
                (length,) = struct.unpack("<Q", head)
                if length > min(size - 8, HEADER_LIMIT):
                    raise PostError(f"{self.path}: header length {length} runs past the end of the file "
                                    f"({size} bytes): truncated or not safetensors")
                text = f.read(length)
        except OSError as e:
            raise PostError(f"{self.path}: cannot read ({e.strerror or e})")
        try:
            header = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise PostError(f"{self.path}: the header is not JSON ({e}): not a safetensors file")
        if not isinstance(header, dict):
            raise PostError(f"{self.path}: the header is not a JSON object: not a safetensors file")
        header.pop("__metadata__", None)
        self.data_start = 8 + length
        self.tensors = {name: self._entry(name, entry, size - self.data_start) for name, entry in header.items()}

    def _entry(self, name, entry, data_bytes):
        where = f"{self.path}: tensor {name}"
        try:
            dtype, shape, (begin, end) = entry["dtype"], [int(n) for n in entry["shape"]], entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise PostError(f"{where}: the header's entry {entry!r} lacks dtype, shape or data_offsets [begin, end]")
        if any(n < 0 for n in shape) or not 0 <= begin <= end:
            raise PostError(f"{where}: shape {shape} or data_offsets [{begin}, {end}] out of range")
        if end > data_bytes:
            raise PostError(f"{where}: names bytes [{begin}, {end}) but the file holds only {data_bytes} data "
                            f"bytes: truncated?")
        if dtype in ELEMENT_BYTES and end - begin != int(np.prod(shape, dtype=np.int64)) * ELEMENT_BYTES[dtype]:
            raise PostError(f"{where}: {end - begin} bytes for shape {shape} of {dtype}")
        return {"dtype": dtype, "shape": shape, "begin": begin, "end": end}

    def read(self, name):
        """The tensor as a float32 array (PostError naming the file and tensor for a non-float dtype)."""
        entry = self.tensors[name]
        if entry["dtype"] not in FLOAT_DTYPES:
            raise PostError(f"{self.path}: tensor {name} is {entry['dtype']}; weights are read from "
                            f"{', '.join(FLOAT_DTYPES)}")
        raw = np.memmap(self.path, dtype=FLOAT_DTYPES[entry["dtype"]], mode="r", shape=(int(np.prod(entry["shape"])),),
                        offset=self.data_start + entry["begin"]) if entry["end"] > entry["begin"] else \
            np.zeros(0, dtype=FLOAT_DTYPES[entry["dtype"]])
        values = bf16_to_float32(raw) if entry["dtype"] == "BF16" else raw.astype(np.float32)
        return values.reshape(entry["shape"])


def encode(values, dtype):
    if dtype == "BF16":
        return float32_to_bf16(values)
    return np.ascontiguousarray(values, dtype={"F32": "<f4", "F16": "<f2"}[dtype])


def write(path, tensors, dtype="F32", metadata=None):
    """Writes {name: float32 array} as one safetensors file, every tensor stored as `dtype` (F32, BF16,
    F16), in the order given; the header is padded with spaces so that the data starts 8-byte aligned."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, values in tensors.items():
        size = int(np.prod(np.shape(values), dtype=np.int64)) * ELEMENT_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list(np.shape(values)), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for values in tensors.values():
            f.write(encode(values, dtype).tobytes())
    return offset


def write_folder(out, tensors, dtype="F32", shard_bytes=5 << 30):
    """Hugging Face's layout: model.safetensors when the weights fit in one shard of `shard_bytes`,
    else model-0000k-of-0000n.safetensors and model.safetensors.index.json mapping each tensor to its
    file. Tensors are kept whole, in the order given. Returns the file names written."""
    shards, current, current_bytes = [], {}, 0
    for name, values in tensors.items():
        size = int(np.prod(np.shape(values), dtype=np.int64)) * ELEMENT_BYTES[dtype]
        if current and current_bytes + size > shard_bytes:
            shards.append(current)
            current, current_bytes = {}, 0
        current[name] = values
        current_bytes += size
    shards.append(current)
    metadata = {"format": "pt"}
    if len(shards) == 1:
        write(Path(out) / "model.safetensors", shards[0], dtype, metadata)
        return ["model.safetensors"]
    names = [f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors" for k in range(len(shards))]
    total = sum(write(Path(out) / file, shard, dtype, metadata) for file, shard in zip(names, shards))
    index = {"metadata": {"total_size": total},
             "weight_map": {name: file for file, shard in zip(names, shards) for name in shard}}
    (Path(out) / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return names + ["model.safetensors.index.json"]

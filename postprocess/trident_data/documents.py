"""The documents of a corpus, a piece at a time, so that memory stays bounded however large it is.

A file ending in .jsonl (or .json, one object per line) gives one document per line, its `field`
string; any other file is UTF-8 text: one document, or, with `separator`, one per run of lines
between lines equal to it (the fortune files' "%"). A whole-file document comes in pieces of about
CHUNK_CHARS characters cut at line ends, each tokenized on its own, so that a file larger than
memory still encodes (a SentencePiece tokenizer that adds a dummy prefix then sees one extra space
at the start of each piece's first line, once per 64 Mi characters). Files are read in the order
given.
"""
import json
from pathlib import Path

from . import DataError

CHUNK_CHARS = 1 << 26


def add_corpus_arguments(parser):
    """The options that say what the corpus is, shared by the commands that read one."""
    parser.add_argument("inputs", metavar="TEXT", nargs="+", help="text files, or .jsonl files with a text field")
    parser.add_argument("--jsonl-field", default="text", help="field holding the text in .jsonl files (default text)")
    parser.add_argument("--separator", metavar="LINE", default=None,
                        help="a line that separates documents inside a text file (e.g. %% in fortune files)")


def check_files(paths):
    missing = [str(p) for p in paths if not Path(p).is_file()]
    if missing:
        raise DataError(f"no such file: {', '.join(missing)}")
    return [Path(p) for p in paths]


def _jsonl_documents(path, field):
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{number}: not a JSON object ({e.msg})") from None
            text = record.get(field) if isinstance(record, dict) else None
            if not isinstance(text, str):
                raise DataError(f"{path}:{number}: no string field '{field}' (choose it with --jsonl-field)")
            yield text


def _separated_documents(path, separator):
    with open(path, encoding="utf-8", errors="replace") as lines:
        document = []
        for line in lines:
            if line.rstrip("\n") == separator:
                yield "".join(document)
                document = []
            else:
                document.append(line)
        yield "".join(document)


def _file_pieces(path):
    """(text, ends_document) pieces of a whole-file document; leading blank lines are dropped, and a
    blank file gives nothing."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        piece, size, seen_text = [], 0, False
        for line in lines:
            seen_text = seen_text or bool(line.strip())
            if not seen_text:
                continue
            piece.append(line)
            size += len(line)
            if size >= CHUNK_CHARS:
                yield "".join(piece), False
                piece, size = [], 0
        if seen_text:
            yield "".join(piece), True


def documents(paths, field="text", separator=None):
    """Yields (path, text, ends_document) for the pieces of every non-blank document of `paths`."""
    for path in paths:
        if path.suffix not in (".jsonl", ".json") and separator is None:
            for text, ends in _file_pieces(path):
                yield path, text, ends
            continue
        whole = _jsonl_documents(path, field) if path.suffix in (".jsonl", ".json") else _separated_documents(
            path, separator)
        for text in whole:
            if text.strip():
                yield path, text, True

"""trident-data: turn a text corpus into the token shards trident trains on (DESIGN.md "Token data")."""
__version__ = "0.1.0"


class DataError(Exception):
    """Bad input (a missing file, an empty corpus, a tokenizer that does not fit): one line, exit 2."""

    code = 2

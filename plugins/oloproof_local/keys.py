"""How the local store keeps a cache key: a digest as its bytes, any other key as its text."""

from __future__ import annotations


def stored_key(key: str) -> str | bytes:
    """A cache key as the cache table holds it: a sha256 digest (64 lowercase hex characters, what
    the runs' keys are) as its 32 bytes, any other key as its text. The table's index, which every
    value's insert lands somewhere in, is then a third smaller and a large run rewrites fewer of
    its pages at each commit."""
    if len(key) == 64:
        try:
            raw = bytes.fromhex(key)
        except ValueError:
            return key
        if len(raw) == 32 and raw.hex() == key:  # exactly the digest's text: no other key maps here
            return raw
    return key


def key_text(key: str | bytes) -> str:
    """The key a cache row was stored under (the inverse of :func:`stored_key`)."""
    return key.hex() if isinstance(key, bytes) else key

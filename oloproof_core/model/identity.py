"""Content identities: canonical JSON and its sha256, for cache keys and content ids."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from attrs import asdict, has


def _default(value: Any) -> Any:
    if has(type(value)):
        return asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _encoder(allow_nan: bool) -> json.JSONEncoder:
    return json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan,
                            default=_default)


# built once: json.dumps with these options would build an encoder on every call (several a case)
_ENCODERS = {True: _encoder(True).encode, False: _encoder(False).encode}


def canonical(data: Any, allow_nan: bool = True) -> str:
    """The canonical JSON of plain data: sorted keys, no whitespace, UTF-8 kept.

    :param allow_nan: False raises ValueError for NaN and infinities (not JSON a strict parser reads).
    """
    return _ENCODERS[allow_nan](data)


def digest(data: Any) -> str:
    """sha256 hex of the canonical JSON of ``data``."""
    return hashlib.sha256(canonical(data).encode("utf-8")).hexdigest()


def combine(*digests: str) -> str:
    """sha256 hex of digests of parts, in order: the key of a whole whose parts are digested once
    each (the system's identity once per run, each case's input once), not serialised again for
    every key they belong to."""
    return hashlib.sha256(":".join(digests).encode("ascii")).hexdigest()

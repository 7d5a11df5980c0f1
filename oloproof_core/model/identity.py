"""Content identities: canonical JSON and its sha256, for cache keys and content ids."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from attrs import asdict, has


def _default(value: Any) -> Any:
    if has(type(value)):
        return asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def json_encoder(*, sort_keys: bool = False, separators: tuple[str, str] = (", ", ": "), allow_nan: bool = True,
                 default: Callable[[Any], Any] | None = None) -> Callable[[Any], str]:
    """A function encoding a value as ``json.JSONEncoder(ensure_ascii=False, check_circular=False,
    ...).encode`` does, made once: ``encode`` builds the C encoder anew on every call, which costs
    more than encoding a small value (several values a case). A cycle is a RecursionError, as with
    ``check_circular=False``; a value of another type goes to ``default`` (a TypeError without one).

    :param separators: (item separator, key separator), as ``json.dumps`` takes them.
    """
    plain = json.JSONEncoder(sort_keys=sort_keys, separators=separators, ensure_ascii=False, allow_nan=allow_nan,
                             check_circular=False, default=default)
    try:
        from _json import make_encoder
    except ImportError:  # an interpreter without the C accelerator
        return plain.encode
    from json.encoder import encode_basestring

    fast = make_encoder(None, plain.default, encode_basestring, None, separators[1], separators[0], sort_keys, False,
                        allow_nan)
    join = "".join

    def encode(value: Any) -> str:
        return join(fast(value, 0))

    return encode


_JSON = json_encoder()  # what json_text falls back to
# a date or a dataclass goes to the fallback, as to the json module (orjson would write them)
_JSON_TEXT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def json_text(value: Any) -> str:
    """The JSON text a store keeps of plain data (a case record, a cache value): orjson's compact
    text, several times quicker to make than the json module's. A value orjson refuses (an integer
    past 64 bits, a key that is not a string, a lone surrogate, a type JSON has not) is encoded by
    the json module, which writes or refuses it as it always has. Not for keys and identities
    (:func:`canonical`), and not for values that may hold NaN: orjson writes it as null, and every
    value from outside is checked for it where it comes in (model/untrusted.py)."""
    try:
        return orjson.dumps(value, option=_JSON_TEXT).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return _JSON(value)


# built once: json.dumps with these options would build an encoder on every call (several a case)
_ENCODERS = {nan: json_encoder(sort_keys=True, separators=(",", ":"), allow_nan=nan, default=_default)
             for nan in (True, False)}


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

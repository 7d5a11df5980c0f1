"""Values from outside made storable once, where they come in: a system's output and artifacts, a
service's body, a judge's verdict and rationale, an error message, a case source's values.

Everything a store, an export and a strict JSON reader will take passes as it is (a fast check by
the C encoder). Otherwise the value is walked once: a lone surrogate (half of a UTF-16 pair: a
byte decoded with ``surrogateescape``, a reply cut inside an emoji, ``"\\ud800"`` in a body) is
escaped as its ``\\udXXX`` text and its path noted, so the case record can say so; a number that is
not finite, an integer longer than Python prints, a type JSON has not (a set, bytes, a datetime),
a duplicate key or nesting deeper than :data:`MAX_NESTING` is :class:`NotStorable`, the error of
that one case. Nothing here recurses deeper than :data:`MAX_NESTING`, whatever it is given.
"""

from __future__ import annotations

import json
import math
from typing import Any

from oloproof_core.model.identity import json_encoder

MAX_NESTING = 200  # levels of lists and objects in a value from outside
MAX_INT_DIGITS = 4300  # Python's own limit on printing an integer (sys.get_int_max_str_digits)

_CHECK = json_encoder(allow_nan=False)
_CONTAINERS = (dict, list, tuple)


class NotStorable(ValueError):
    """A value from outside that no store can keep: what is wrong, at which JSON path."""

    def __init__(self, path: str, problem: str):
        if len(path) > 80:  # a path 5,000 levels deep says no more than its start
            path = path[:60] + "..."
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


def clean_text(text: str) -> tuple[str, bool]:
    """``text`` with every lone surrogate escaped as ``\\udXXX`` text, and whether one was."""
    if text.isascii():
        return text, False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8"), True
    return text, False


def storable(value: Any, path: str = "$") -> tuple[Any, list[str]]:
    """``value`` as a store keeps it, and the JSON paths where lone surrogates were escaped.
    Raises :class:`NotStorable` for what cannot be kept (see the module)."""
    if value is None or type(value) in (bool, int):
        return value, []
    if type(value) is str:
        text, escaped = clean_text(value)
        return text, [path] if escaped else []
    try:  # the common case: one pass in C, nothing rebuilt
        text = _CHECK(value)
        if not text.isascii():
            text.encode("utf-8")  # a lone surrogate: UnicodeEncodeError
        if (len(text) <= MAX_NESTING or text.count("[") + text.count("{") <= MAX_NESTING) and _plain_keys(value):
            return value, []
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError):
        pass
    escaped: list[str] = []
    return _walk(value, path, 0, escaped), escaped


def _plain_keys(value: Any) -> bool:
    """Whether every key of the outermost object is a string (the encoder turns 1 into "1" and a
    duplicate may follow); nested objects are checked by the walk when the text says nothing."""
    return not isinstance(value, dict) or all(type(k) is str for k in value)


def _walk(value: Any, path: str, depth: int, escaped: list[str]) -> Any:
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        text, was = clean_text(str(value))
        if was:
            escaped.append(path)
        return text
    if isinstance(value, int):
        if value.bit_length() > 3 * MAX_INT_DIGITS:  # 3.32 bits a digit: check it exactly
            try:
                str(value)
            except ValueError:
                raise NotStorable(path, f"an integer of more than {MAX_INT_DIGITS} digits") from None
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            name = "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
            raise NotStorable(path, f"{name} is not a JSON number")
        return float(value)
    if not isinstance(value, _CONTAINERS):
        raise NotStorable(path, f"a value of type {type(value).__name__} is not JSON")
    if depth >= MAX_NESTING:
        raise NotStorable(path, f"nested more than {MAX_NESTING} levels deep")
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = _key(key, path)
            name, was = clean_text(name)
            if was:
                escaped.append(f"{path}.{name}")
            if name in out:
                raise NotStorable(path, f"duplicate key {name!r}")
            out[name] = _walk(item, f"{path}.{name}", depth + 1, escaped)
        return out
    return [_walk(item, f"{path}[{i}]", depth + 1, escaped) for i, item in enumerate(value)]


def _key(key: Any, path: str) -> str:
    """A key as JSON writes it: a string as it is, ``1`` as ``"1"``, ``True`` as ``"true"``."""
    if isinstance(key, str):
        return str(key)
    if key is None or isinstance(key, (bool, int, float)):
        if isinstance(key, float) and not math.isfinite(key):
            raise NotStorable(path, f"the key {key!r} is not a JSON number")
        return json.dumps(key)
    raise NotStorable(path, f"a key of type {type(key).__name__} is not a JSON key")


# -- reading a body: strict JSON, bounded ------------------------------------------------------


class Refused(ValueError):
    """What is not strict JSON though the json module reads it: NaN, a number too large to be
    finite, a duplicate key, nesting past the bound."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise Refused(f"duplicate key {clean_text(key)[0]!r}")
            seen.add(key)
    return obj


def _constant(name: str) -> Any:
    raise Refused(f"{name} is not a JSON number")


def _float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise Refused(f"{text[:40]} is too large for a number")
    return number


#: the json module's hooks that refuse (Refused) what strict JSON has not; also a JSONL line's (config/files.py)
STRICT_HOOKS = {"object_pairs_hook": _pairs, "parse_constant": _constant, "parse_float": _float}
_STRICT = json.JSONDecoder(**STRICT_HOOKS)


def strict_json(data: bytes | str) -> Any:
    """A JSON document read strictly: UTF-8, no NaN or Infinity, no number too large to be finite,
    no duplicate key, at most :data:`MAX_NESTING` deep. Raises ``ValueError`` saying what is wrong
    (``str(exc)``), never RecursionError; a lone surrogate escape is kept, for :func:`storable`."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data  # UnicodeDecodeError: a ValueError
    text = text.removeprefix("\ufeff")
    if text.count("[") + text.count("{") > MAX_NESTING and _depth(text) > MAX_NESTING:
        raise Refused(f"nested more than {MAX_NESTING} levels deep")
    try:
        return _STRICT.decode(text)
    except RecursionError:
        raise Refused(f"nested more than {MAX_NESTING} levels deep") from None


def _depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text, strings skipped (their escapes too)."""
    import re

    deepest = depth = 0
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def is_refusal(exc: BaseException) -> bool:
    """Whether :func:`strict_json` refused a body that parses as loose JSON (NaN, a duplicate key,
    too deep), rather than one that is not JSON at all."""
    return isinstance(exc, Refused)

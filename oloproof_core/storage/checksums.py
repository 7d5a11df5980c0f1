"""Checksums of what a store holds: sha256, or with the store key HMAC-SHA256 (docs/stores.md,
keyed checksums); the store key; what a stored checksum says; and the run ids a store may hold."""

from __future__ import annotations

import hashlib
import json
import hmac
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oloproof_core.model.errors import OloproofError

CHECK = "run `oloproof store check`"
KEYED = "hmac:"  # the prefix of a checksum made with the store key (HMAC-SHA256)
KEY_ENV = "OLOPROOF_STORE_KEY"  # the store key's text, or:
KEY_FILE = ".oloproof/key"  # a file in the project holding it (first line)
RUN_ID = re.compile(r"run_[A-Za-z0-9_-]{1,100}\Z")
QUARANTINED = "quarantined:"  # the prefix `store repair` gives a damaged run's id


def checksum(*parts: str, key: bytes | None = None) -> str:
    """sha256 hex of the parts, each ended by a NUL byte (so no two splits of a text collide);
    with the store ``key``, ``hmac:`` and the HMAC-SHA256 hex of the same bytes."""
    text = "\0".join(parts) + "\0" if parts else ""  # one encode and one update: the same bytes
    data = text.encode("utf-8", "surrogatepass")
    if key is not None:
        return KEYED + hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


def keyed(stored: str | None) -> bool:
    """Whether a stored checksum (or a seal's ``meta``) was made with a store key."""
    return isinstance(stored, str) and stored.startswith(KEYED)


def verdict(stored: str | None, parts: Sequence[str], key: bytes | None) -> str:
    """What a stored checksum says of the parts: ``ok``; ``unverified`` (no checksum, or one made
    with a store key this process does not have); ``unsigned`` (a plain checksum where the store
    key is set: anyone with table rights could have written it); ``damaged``."""
    if stored is None:
        return "unverified"
    if key is None:
        if keyed(stored):
            return "unverified"
        return "ok" if hmac.compare_digest(stored, checksum(*parts)) else "damaged"
    if not keyed(stored):
        return "unsigned"
    return "ok" if hmac.compare_digest(stored, checksum(*parts, key=key)) else "damaged"


def store_key(project_dir: Path | str | None) -> bytes | None:
    """The store key (docs/stores.md, keyed checksums): ``$OLOPROOF_STORE_KEY``, else the first line
    of ``.oloproof/key`` in the project, else None (plain sha256 checksums). At least 16 characters."""
    text, where = os.environ.get(KEY_ENV, ""), KEY_ENV
    if not text.strip() and project_dir is not None:
        path = Path(project_dir) / KEY_FILE
        try:
            text, where = path.read_text(encoding="utf-8").splitlines()[0] if path.stat().st_size else "", KEY_FILE
        except FileNotFoundError:
            text = ""
        except (OSError, UnicodeDecodeError, IndexError) as exc:
            raise OloproofError(f"the store key file cannot be read: {type(exc).__name__}", where=KEY_FILE,
                                fix="write the key (16 characters or more) on its first line, as UTF-8") from None
    text = text.strip()
    if not text:
        return None
    if len(text) < 16:
        raise OloproofError("the store key is shorter than 16 characters", where=where,
                            fix="use a long random key, e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`")
    return text.encode("utf-8")


def key_needed(what: str, where: str) -> OloproofError:
    return OloproofError(f"{what} is signed with a store key, and this command has none", where=where,
                         fix=f"set {KEY_ENV} (or {KEY_FILE}) to the store's key")


def unsigned(what: str, where: str) -> OloproofError:
    return OloproofError(f"{what} is not signed with the store key (anyone with table rights could have written it)",
                         where=where, fix=f"{CHECK}; `oloproof store repair` quarantines it")


def valid_run_id(run_id: object) -> bool:
    """Whether a stored run id is one oloproof makes: ``run_`` and letters, digits, ``_`` or ``-``."""
    return isinstance(run_id, str) and RUN_ID.match(run_id) is not None



def shown_text(text: object, limit: int = 80) -> str:
    """A stored text as a problem line shows it: escaped (no control character, no undecodable
    byte printed raw), cut at ``limit`` characters."""
    if isinstance(text, bytes):
        text = text.hex()
    shown = str(text).encode("unicode_escape", "backslashreplace").decode("ascii")
    return shown if len(shown) <= limit else shown[:limit] + "..."


def checked_object(object_id: str, kind: str, record: str, stored: str | None, key: bytes | None, where: str,
                   damaged: Any) -> dict:
    """A stored object (comparison, diagnosis...) read back: its record, or the error its checksum
    calls for (``damaged(what)`` makes the store's own damage error)."""
    found = verdict(stored, (object_id, kind, record), key)
    if found == "unverified" and stored is not None:
        raise key_needed(f"{kind} {object_id}", where)
    if found == "unsigned":
        raise unsigned(f"{kind} {object_id}", where)
    if found == "damaged":
        raise damaged(f"{kind} {object_id}")
    return json.loads(record)

"""What every store shares: the checksum of a value, the seal of a run, and the check of a whole
store from its rows. A store plugin imports them from ``oloproof``; ``oloproof.testing`` checks a
store against the contract (docs/stores.md)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

CHECK = "run `oloproof store check`"


def checksum(*parts: str) -> str:
    """sha256 hex of the parts, each ended by a NUL byte (so no two splits of a text collide)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def seal_of(header: str, summary: str, records: Iterable[tuple[int, str, str]]) -> dict:
    """The seal of a run: its case count, the digest of its case rows, the digest of the rest."""
    h, n = hashlib.sha256(), 0
    for idx, case_id, record in records:
        h.update(checksum(str(idx), case_id, record).encode())
        n += 1
    return {"cases": n, "digest": h.hexdigest(), "meta": checksum(header, summary)}


def seal_intact(header: str, summary: str, seal: str) -> dict | None:
    """The run's seal if its header and summary match it, else None."""
    try:
        data = json.loads(seal)
        return data if data["meta"] == checksum(header, summary) else None
    except (ValueError, KeyError, TypeError):
        return None


def check_rows(runs: Iterable[tuple[str, str, str, str | None, list]], cache: Iterable[tuple[str, str, str, str | None]],
               objects: Iterable[tuple[str, str, str, str | None]]) -> tuple[dict, list[str]]:
    """Verify a store from its rows: each run ``(id, header, summary, seal, case rows)`` against
    its seal, each cache value ``(ns, key, value, checksum)`` and object ``(id, kind, record,
    checksum)`` against its checksum. Returns the counts and the problems, one line each."""
    problems: list[str] = []
    counts = {"runs": 0, "cases": 0, "cache": 0, "objects": 0, "unverified": 0}
    for run_id, header, summary, seal, rows in runs:
        counts["runs"] += 1
        counts["cases"] += len(rows)
        if seal is None:
            counts["unverified"] += 1
            continue
        data = seal_intact(header, summary, seal)
        if data is None:
            problems.append(f"run {run_id}: its header or summary does not match its seal")
        elif len(rows) != data["cases"]:
            problems.append(f"run {run_id}: {len(rows)} case records, {data['cases']} stored")
        elif seal_of("", "", rows)["digest"] != data["digest"]:
            problems.append(f"run {run_id}: its case records do not match its seal")
    for ns, key, value, stored in cache:
        counts["cache"] += 1
        if stored is None:
            counts["unverified"] += 1
        elif stored != checksum(ns, key, value):
            problems.append(f"cache {ns} {key[:16]}: its value does not match its checksum")
    for object_id, kind, record, stored in objects:
        counts["objects"] += 1
        if stored is None:
            counts["unverified"] += 1
        elif stored != checksum(object_id, kind, record):
            problems.append(f"{kind} {object_id}: its record does not match its checksum")
    return counts, problems


def store_spec(text: str, stores: Any, where: str) -> tuple[str, dict]:
    """``--store`` / ``OLOPROOF_STORE``: a store type (``local``), a URL whose scheme a store
    registered (``postgresql://...``), or a YAML flow mapping (``{type: local, path: x}``).
    Returns the store type and its options as plain data."""
    from .errors import ConfigError

    text = text.strip()
    if text.startswith("{"):
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            data = YAML(typ="safe").load(text)
        except YAMLError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ConfigError("expected a YAML mapping with `type:`", where=where,
                              fix="write {type: postgres, dsn: ...}, a store type, or a postgresql:// URL")
        data = dict(data)
        return data.pop("type"), data
    scheme, sep, _ = text.partition("://")
    if sep:
        for entry in stores:
            if scheme in entry.extra.get("url_schemes", ()):
                return entry.name, {entry.extra.get("shorthand", "url"): text}
        raise ConfigError(f"no store takes {scheme}:// addresses", where=where,
                          fix="install the store's plugin (pip install 'oloproof[postgres]' for postgresql://)")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", text):  # never repeated: it may hold a password
        raise ConfigError("expected a store type, a URL or a {type: ...} mapping", where=where,
                          fix="write local, postgresql://user@host/database, or {type: postgres, dsn: ...}")
    return text, {}

"""What every store shares: the checksum of a value, the seal of a run, and the check of a whole
store from its rows. A store plugin imports them from ``oloproof``; ``oloproof.testing`` checks a
store against the contract (docs/stores.md)."""

from __future__ import annotations

import abc
import hashlib
import hmac
import json
import os
import re
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from oloproof_core.model.errors import OloproofError
from oloproof_core.model.identity import json_text
from oloproof_core.storage.checksums import (  # noqa: F401 - re-exported: oloproof imports them from here
    CHECK,
    KEY_ENV,
    KEY_FILE,
    KEYED,
    QUARANTINED,
    checksum,
    key_needed,
    keyed,
    shown_text,
    store_key,
    unsigned,
    valid_run_id,
    verdict,
)

PAGE = 2000  # case rows a store reads at once when it streams a run
CHUNK = 1000  # case records save_run hands to its writer at once


class Sealer:
    """The seal of a run, computed as its case rows are added: each row's checksum (kept beside
    the row, so that one record is checked alone) goes into the running digest."""

    def __init__(self, key: bytes | None = None) -> None:
        self.hash, self.cases, self.key = hashlib.sha256(), 0, key

    def add(self, idx: int, case_id: str, record: str) -> str:
        """Fold one row into the digest; returns the row's checksum."""
        row = row_checksum(idx, case_id, record, key=self.key)
        self.hash.update(row.encode())
        self.cases += 1
        return row

    def fold(self, rows: Iterable[tuple[int, str, str, str]]) -> None:
        """Fold rows ``(idx, case_id, record, row checksum)`` already checksummed (``case_rows``)."""
        for row in rows:
            self.hash.update(row[3].encode())
            self.cases += 1

    def seal(self, header: str, summary: str, run_id: str = "") -> dict:
        digest = self.hash.hexdigest()
        return {"cases": self.cases, "digest": digest, "meta": seal_meta(run_id, header, summary, self.cases, digest, self.key)}


def seal_meta(run_id: str, header: str, summary: str, cases: int, digest: str, key: bytes | None) -> str:
    """A seal's ``meta``: without a key the checksum of the header and summary; with one, the HMAC
    of the run id, header, summary, case count and digest (a writer without the key can neither
    change the rows nor re-seal them)."""
    if key is None:
        return checksum(header, summary)
    return checksum(run_id, header, summary, str(cases), digest, key=key)


def row_checksum(idx: int, case_id: str, record: str, key: bytes | None = None) -> str:
    """One case row's checksum: the term of the run's seal digest for that row."""
    return checksum(str(idx), case_id, record, key=key)


def case_rows(records: Iterable[dict], start: int, key: bytes | None = None) -> list[tuple[int, str, str, str]]:
    """Case records as rows ``(idx, case_id, record text, row checksum)`` numbered from ``start``
    (the record's key order kept: judgments stay in the suite's evaluator order). A record that
    cannot be stored as it is (storable_record) is stored as that one case's problem."""
    rows = []
    for idx, record in enumerate(records, start):
        try:
            text = json_text(record)
            if not text.isascii():
                text.encode("utf-8")  # a lone surrogate would stop the store's insert, not this row
        except (TypeError, ValueError, RecursionError):
            record = storable_record(record)
            text = json_text(record)
        rows.append((idx, record["id"], text, row_checksum(idx, record["id"], text, key)))
    return rows


def storable_record(record: dict) -> dict:
    """A case record the store can keep: what escaping lone surrogates gives (noted in its
    ``escaped``), else the case with no output and the problem as its missing reason
    (``unstorable: ...``). Values from outside are made storable before they reach a record
    (model/untrusted.py); this is the last guard, for a record built some other way."""
    from oloproof_core.model.untrusted import NotStorable, clean_text, storable

    try:
        data, escaped = storable(record)
    except NotStorable as exc:
        case_id = clean_text(str(record.get("id")))[0]
        try:
            case = storable(record.get("case") or {})[0]
        except NotStorable:
            case = {}
        case = {"input": {}, "expected": {}, "metadata": {}, **case, "id": case_id}
        return {"id": case_id, "case": case, "output": None, "artifacts": {},
                "missing": f"unstorable: {clean_text(str(exc))[0]}", "judgments": {}}
    if escaped:
        data["escaped"] = [*data.get("escaped", ()), *escaped]
    return data


class RunWriter(abc.ABC):
    """What ``store.begin_run`` returns, less the store's SQL: case rows numbered and sealed as
    they are added, the state that makes ``finish`` and ``abort`` safe to call in any order. A
    store subclasses it with ``_insert(rows)`` (one transaction of its own, or a part of the open
    batch), ``_finish(header, summary, seal)`` (the run row, visible at once) and ``_remove()``
    (the rows ``_insert`` wrote, unless the run was finished)."""

    def __init__(self, run_id: str, key: bytes | None = None) -> None:
        self.run_id, self.sealer, self.state, self.key = run_id, Sealer(key), "open", key

    def add(self, records: Sequence[dict]) -> None:
        if self.state != "open":
            raise OloproofError(f"run {self.run_id} is {self.state}: no case record can be added",
                                fix="begin a new run")
        try:
            rows = case_rows(records, self.sealer.cases, self.key)
            if rows:
                rows = self._insert_rows(rows)
        except BaseException:
            self.state = "broken"  # only abort() is left
            raise
        self.sealer.fold(rows)

    def _insert_rows(self, rows: list[tuple[int, str, str, str]]) -> list[tuple[int, str, str, str]]:
        """Insert the rows; if the store refuses the batch for what a row holds, each row on its
        own, a refused one replaced by its case's problem (one bad row costs one case). Returns
        the rows as stored."""
        from oloproof_core.storage.cache_writer import row_fault

        try:
            self._insert(rows)
            return rows
        except Exception as exc:
            if not row_fault(exc):
                raise
        stored = []
        for row in rows:
            try:
                self._insert([row])
            except Exception as exc:
                if not row_fault(exc):
                    raise
                idx, case_id = row[0], ascii(row[1])[1:-1]
                text = json_text({"id": case_id, "case": {"id": case_id, "input": {}, "expected": {}, "metadata": {}},
                                  "output": None, "artifacts": {}, "missing": f"unstorable: {type(exc).__name__}",
                                  "judgments": {}})
                row = (idx, case_id, text, row_checksum(idx, case_id, text))
                self._insert([row])
            stored.append(row)
        return stored

    def finish(self, header: dict, summary: dict) -> None:
        if self.state != "open":
            raise OloproofError(f"run {self.run_id} is {self.state}: it cannot be finished", fix="run the suite again")
        if header.get("id") != self.run_id:
            raise OloproofError(f"the header's id {header.get('id')!r} is not the run's id {self.run_id}",
                                fix="finish a run with its own header")
        header_text, summary_text = json.dumps(header), json.dumps(summary)
        self._finish(header_text, summary_text, json.dumps(self.sealer.seal(header_text, summary_text, self.run_id)))
        self.state = "finished"

    def abort(self) -> None:
        if self.state in ("finished", "aborted"):
            return
        self.state = "aborted"
        self._remove()

    @abc.abstractmethod
    def _insert(self, rows: list[tuple[int, str, str, str]]) -> None:
        """Write the rows: a transaction of its own, or a part of the store's open batch."""

    @abc.abstractmethod
    def _finish(self, header: str, summary: str, seal: str) -> None:
        """Write the run's row, making the run visible at once."""

    @abc.abstractmethod
    def _remove(self) -> None:
        """Remove the rows ``_insert`` wrote (the run was not finished)."""


def write_run(writer: Any, header: dict, cases: Iterable[dict], summary: dict, size: int = CHUNK) -> None:
    """Add ``cases`` (any iterable, read once) to ``writer`` in chunks, then finish it with the
    header and summary; on any error (or Ctrl-C) abort it, so nothing is left, and re-raise."""
    try:
        chunk: list[dict] = []
        for case in cases:
            chunk.append(case)
            if len(chunk) == size:
                writer.add(chunk)
                chunk = []
        if chunk:
            writer.add(chunk)
        writer.finish(header, summary)
    except BaseException as first:
        try:
            writer.abort()
        except Exception as cleanup:  # noqa: BLE001 - the first error is the one to report
            first.add_note(f"(and its case rows could not be removed: {cleanup}; the next run begun in the store "
                           "removes them)")
        raise


def this_process() -> tuple[str, int]:
    """(host, pid) of this process, as a writer records itself."""
    return socket.gethostname(), os.getpid()


def process_gone(host: str, pid: int) -> bool:
    """Whether the process ``pid`` on ``host`` is known to have ended: only a process on this
    machine can be known so; one elsewhere may still be running."""
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, under another user
        return False
    return False


def seal_of(header: str, summary: str, records: Iterable[tuple[int, str, str]], key: bytes | None = None,
            run_id: str = "") -> dict:
    """The seal of a run: its case count, the digest of its case rows, the digest of the rest."""
    sealer = Sealer(key)
    for idx, case_id, record in records:
        sealer.add(idx, case_id, record)
    return sealer.seal(header, summary, run_id)


def rows_problem(seal: dict, rows: Iterable[tuple[int, str, str]], key: bytes | None = None) -> str | None:
    """What is wrong with a run's case rows against its seal (``None``: they match), hashing the
    rows without parsing them."""
    found = seal_of("", "", rows, key)
    if found["cases"] != seal["cases"]:
        return f"{found['cases']} of its {seal['cases']} case records"
    return None if found["digest"] == seal["digest"] else "its case records"


def sealed_records(page: Callable[[int, int], list], seal: dict | None, damaged: Callable[[str], Exception],
                   size: int = PAGE, key: bytes | None = None) -> Iterator[dict]:
    """A run's case records in case order, read in pages of ``size`` rows (``page(after_idx,
    size)`` returns the rows ``(idx, case_id, record)`` after ``after_idx``), never one record
    of a run whose rows do not match its ``seal``: a run of one page is checked and parsed from
    that one read; a longer one is first hashed page by page, then read again and parsed. Memory
    stays one page whatever the run's length. ``seal`` None: stored before seals, not checked."""

    def pages(first: list) -> Iterator[tuple[int, str, str]]:
        rows = first
        while rows:
            yield from rows
            if len(rows) < size:
                return
            rows = page(rows[-1][0], size)

    first = page(-1, size)
    if seal is not None:
        problem = rows_problem(seal, pages(first), key if keyed(seal.get("meta")) else None)
        if problem is not None:
            raise damaged(problem)
    for _, _, record in pages(first):
        yield json.loads(record)


def listed_runs(store: Any, rows: list) -> list[dict]:
    """``list_runs`` from the rows ``(id, header, summary, seal)``: the intact ones' headers; the
    ids of the others (an unsigned or key-less run included) in ``store.damaged_runs``: one damaged
    run never hides the others. ``store._seal(run_id, header, summary, seal)`` raises on a bad seal."""
    headers, store.damaged_runs = [], []
    for run_id, header, summary, seal in rows:
        if not valid_run_id(run_id):
            if not str(run_id).startswith(QUARANTINED):
                store.damaged_runs.append(run_id)
            continue
        try:
            store._seal(run_id, header, summary, seal)
            headers.append(json.loads(header))
        except (OloproofError, ValueError):
            store.damaged_runs.append(run_id)
    return headers


def damaged_run(run_id: str, problem: str, where: str) -> OloproofError:
    """The error of a run whose case rows do not match its seal (``problem`` says which rows)."""
    return OloproofError(f"run {run_id} is damaged: {problem} do not match what was stored", where=where,
                         fix=f"{CHECK} to see everything damaged; run the suite again")


def checked_case(run_id: str, case_id: str, row: tuple | None, whole_run: Callable[[], Iterator[dict]],
                 where: str, key: bytes | None = None) -> dict | None:
    """``run_case``'s answer from the row ``(idx, record, row checksum)`` a store found by case id
    (None: the run has no such case): the record once its checksum matches; a row stored before
    row checksums is checked with its whole run (``whole_run()``, the store's ``run_cases``)."""
    if row is None:
        return None
    idx, record, stored = row
    if stored is None:
        return next((r for r in whole_run() if r["id"] == case_id), None)
    found = verdict(stored, (str(idx), case_id, record), key)
    if found == "unverified":
        raise key_needed(f"run {run_id}", where)
    if found == "unsigned":
        raise unsigned(f"run {run_id}", where)
    if found != "ok":
        raise damaged_run(run_id, f"case {case_id}'s record does", where)
    return json.loads(record)


def seal_intact(header: str, summary: str, seal: str, key: bytes | None = None, run_id: str = "") -> dict | None:
    """The run's seal if its header and summary match it, else None. With a ``key``, only a seal
    made with that key is intact; a keyed seal without a key is None too (``seal_verdict`` tells
    which)."""
    return seal_verdict(header, summary, seal, key, run_id)[1]


def seal_verdict(header: str, summary: str, seal: str | None, key: bytes | None = None,
                 run_id: str = "") -> tuple[str, dict | None]:
    """``(verdict, seal)`` of a run's stored seal: ``ok`` with the seal as a dict, or ``unverified``
    (no seal; or one made with a key this process lacks), ``unsigned`` (a plain seal where the key
    is set) or ``damaged``, with None."""
    if seal is None:
        return "unverified", None
    try:
        data = json.loads(seal)
        meta = data["meta"]
        if keyed(meta):
            if key is None:
                return "unverified", None
            expected = seal_meta(run_id, header, summary, int(data["cases"]), str(data["digest"]), key)
        else:
            if key is not None:
                return "unsigned", None
            expected = checksum(header, summary)
        return ("ok", data) if isinstance(meta, str) and hmac.compare_digest(meta, expected) else ("damaged", None)
    except (ValueError, KeyError, TypeError):
        return "damaged", None


def checked_seal(run_id: str, header: str, summary: str, seal: str | None, key: bytes | None, where: str,
                 damaged: Callable[[str], Exception]) -> dict | None:
    """A read's check of a run's header and summary: its seal (None: stored before seals), or the
    error (``damaged(what)`` for a damaged one; a signed one without the key; an unsigned one with it)."""
    if seal is None:
        return None
    found, data = seal_verdict(header, summary, seal, key, run_id)
    if found == "ok":
        return data
    if found == "unverified":
        raise key_needed(f"run {run_id}", where)
    if found == "unsigned":
        raise unsigned(f"run {run_id}", where)
    raise damaged(f"run {run_id}")


def store_spec(text: str, stores: Any, where: str) -> tuple[str, dict]:
    """``--store`` / ``OLOPROOF_STORE``: a store type (``local``), a URL whose scheme a store
    registered (``postgresql://...``), or a YAML flow mapping (``{type: local, path: x}``).
    Returns the store type and its options as plain data."""
    from oloproof_core.model.errors import ConfigError

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

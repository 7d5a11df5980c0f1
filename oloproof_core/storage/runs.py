"""What every store shares: the checksum of a value, the seal of a run, and the check of a whole
store from its rows. A store plugin imports them from ``oloproof``; ``oloproof.testing`` checks a
store against the contract (docs/stores.md)."""

from __future__ import annotations

import abc
import hashlib
import json
import os
import re
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from oloproof_core.model.errors import OloproofError

CHECK = "run `oloproof store check`"
PAGE = 2000  # case rows a store reads at once when it streams a run
CHUNK = 1000  # case records save_run hands to its writer at once
_RECORD = json.JSONEncoder(ensure_ascii=False).encode  # a case row's text (built once, not once a row)


def checksum(*parts: str) -> str:
    """sha256 hex of the parts, each ended by a NUL byte (so no two splits of a text collide)."""
    text = "\0".join(parts) + "\0" if parts else ""  # one encode and one update: the same bytes
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Sealer:
    """The seal of a run, computed as its case rows are added: each row's checksum (kept beside
    the row, so that one record is checked alone) goes into the running digest."""

    def __init__(self) -> None:
        self.hash, self.cases = hashlib.sha256(), 0

    def add(self, idx: int, case_id: str, record: str) -> str:
        """Fold one row into the digest; returns the row's checksum."""
        row = row_checksum(idx, case_id, record)
        self.hash.update(row.encode())
        self.cases += 1
        return row

    def fold(self, rows: Iterable[tuple[int, str, str, str]]) -> None:
        """Fold rows ``(idx, case_id, record, row checksum)`` already checksummed (``case_rows``)."""
        for row in rows:
            self.hash.update(row[3].encode())
            self.cases += 1

    def seal(self, header: str, summary: str) -> dict:
        return {"cases": self.cases, "digest": self.hash.hexdigest(), "meta": checksum(header, summary)}


def row_checksum(idx: int, case_id: str, record: str) -> str:
    """One case row's checksum: the term of the run's seal digest for that row."""
    return checksum(str(idx), case_id, record)


def case_rows(records: Iterable[dict], start: int) -> list[tuple[int, str, str, str]]:
    """Case records as rows ``(idx, case_id, record text, row checksum)`` numbered from ``start``
    (the record's key order kept: judgments stay in the suite's evaluator order). A record that
    cannot be stored as it is (storable_record) is stored as that one case's problem."""
    rows = []
    for idx, record in enumerate(records, start):
        try:
            text = _RECORD(record)
            if not text.isascii():
                text.encode("utf-8")  # a lone surrogate would stop the store's insert, not this row
        except (TypeError, ValueError, RecursionError):
            record = storable_record(record)
            text = _RECORD(record)
        rows.append((idx, record["id"], text, row_checksum(idx, record["id"], text)))
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

    def __init__(self, run_id: str) -> None:
        self.run_id, self.sealer, self.state = run_id, Sealer(), "open"

    def add(self, records: Sequence[dict]) -> None:
        if self.state != "open":
            raise OloproofError(f"run {self.run_id} is {self.state}: no case record can be added",
                                fix="begin a new run")
        try:
            rows = case_rows(records, self.sealer.cases)
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
                text = _RECORD({"id": case_id, "case": {"id": case_id, "input": {}, "expected": {}, "metadata": {}},
                                "output": None,
                                "artifacts": {}, "missing": f"unstorable: {type(exc).__name__}", "judgments": {}})
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
        self._finish(header_text, summary_text, json.dumps(self.sealer.seal(header_text, summary_text)))
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
    except BaseException:
        writer.abort()
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


def seal_of(header: str, summary: str, records: Iterable[tuple[int, str, str]]) -> dict:
    """The seal of a run: its case count, the digest of its case rows, the digest of the rest."""
    sealer = Sealer()
    for idx, case_id, record in records:
        sealer.add(idx, case_id, record)
    return sealer.seal(header, summary)


def rows_problem(seal: dict, rows: Iterable[tuple[int, str, str]]) -> str | None:
    """What is wrong with a run's case rows against its seal (``None``: they match), hashing the
    rows without parsing them."""
    found = seal_of("", "", rows)
    if found["cases"] != seal["cases"]:
        return f"{found['cases']} of its {seal['cases']} case records"
    return None if found["digest"] == seal["digest"] else "its case records"


def sealed_records(page: Callable[[int, int], list], seal: dict | None, damaged: Callable[[str], Exception],
                   size: int = PAGE) -> Iterator[dict]:
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
        problem = rows_problem(seal, pages(first))
        if problem is not None:
            raise damaged(problem)
    for _, _, record in pages(first):
        yield json.loads(record)


def damaged_run(run_id: str, problem: str, where: str) -> OloproofError:
    """The error of a run whose case rows do not match its seal (``problem`` says which rows)."""
    return OloproofError(f"run {run_id} is damaged: {problem} do not match what was stored", where=where,
                         fix=f"{CHECK} to see everything damaged; run the suite again")


def checked_case(run_id: str, case_id: str, row: tuple | None, whole_run: Callable[[], Iterator[dict]],
                 where: str) -> dict | None:
    """``run_case``'s answer from the row ``(idx, record, row checksum)`` a store found by case id
    (None: the run has no such case): the record once its checksum matches; a row stored before
    row checksums is checked with its whole run (``whole_run()``, the store's ``run_cases``)."""
    if row is None:
        return None
    idx, record, stored = row
    if stored is None:
        return next((r for r in whole_run() if r["id"] == case_id), None)
    if stored != row_checksum(idx, case_id, record):
        raise damaged_run(run_id, f"case {case_id}'s record does", where)
    return json.loads(record)


def seal_intact(header: str, summary: str, seal: str) -> dict | None:
    """The run's seal if its header and summary match it, else None."""
    try:
        data = json.loads(seal)
        return data if data["meta"] == checksum(header, summary) else None
    except (ValueError, KeyError, TypeError):
        return None


def check_rows(runs: Iterable[tuple[str, str, str, str | None, Iterable]], cache: Iterable[tuple[str, str, str, str | None]],
               objects: Iterable[tuple[str, str, str, str | None]]) -> tuple[dict, list[str]]:
    """Verify a store from its rows: each run ``(id, header, summary, seal, case rows)`` against
    its seal (its case rows ``(idx, case_id, record)`` any iterable, read once in case order), each
    cache value ``(ns, key, value, checksum)`` and object ``(id, kind, record, checksum)`` against
    its checksum. Returns the counts and the problems, one line each."""
    problems: list[str] = []
    counts = {"runs": 0, "cases": 0, "cache": 0, "objects": 0, "unverified": 0}
    for run_id, header, summary, seal, rows in runs:
        counts["runs"] += 1
        found = seal_of("", "", rows)  # one pass over the rows, however many
        counts["cases"] += found["cases"]
        if seal is None:
            counts["unverified"] += 1
            continue
        data = seal_intact(header, summary, seal)
        if data is None:
            problems.append(f"run {run_id}: its header or summary does not match its seal")
        elif found["cases"] != data["cases"]:
            problems.append(f"run {run_id}: {found['cases']} case records, {data['cases']} stored")
        elif found["digest"] != data["digest"]:
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

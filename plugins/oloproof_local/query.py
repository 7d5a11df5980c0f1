"""The local store's answer to ``query_cases``: one page of a run's cases, searched through an
SQLite FTS5 index and filtered and sorted through indexed status and value cells.

The index is derived data in its own database beside the store (``.oloproof/index.db``; in a
private temporary file when that folder cannot be written), built for a run the first time the
run is searched, filtered or sorted, from the run's rows in one pass, and kept: a run never
changes. Deleting the file loses nothing. The run's rows are never written. A page with no
search, filter or sort reads the run's rows by position and needs no index. Every record
returned is checked against its row's checksum, as ``run_case`` checks one.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import tempfile
import threading
from typing import Any

from oloproof import STATUS_RANK as RANK, case_cells, case_text, case_words, checked_case, checked_query, keyed

INDEX = """
CREATE TABLE IF NOT EXISTS indexed (run_id TEXT PRIMARY KEY, digest TEXT);
CREATE TABLE IF NOT EXISTS cases (n INTEGER PRIMARY KEY, run_id TEXT, idx INTEGER, case_id TEXT, missing INTEGER);
CREATE UNIQUE INDEX IF NOT EXISTS cases_run ON cases (run_id, idx);
CREATE INDEX IF NOT EXISTS cases_id ON cases (run_id, case_id, idx);
CREATE TABLE IF NOT EXISTS cells (run_id TEXT, idx INTEGER, criterion TEXT, rank INTEGER, value REAL);
CREATE INDEX IF NOT EXISTS cells_sort ON cells (run_id, criterion, rank, value, idx);
CREATE INDEX IF NOT EXISTS cells_case ON cells (run_id, idx, criterion);
CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(body, content='', tokenize="unicode61 remove_diacritics 0");
"""
BUILD_PAGE = 2000  # rows read (and indexed in one transaction) at once
FILE = "index.db"


class Query:
    """``query_cases`` (a part of ``LocalStore``: its ``root``, ``_head``, ``db`` and locks)."""

    _index: sqlite3.Connection | None = None
    _index_lock = threading.Lock()

    def query_cases(self, run_id: str, search: str | None = None, criterion: str | None = None,
                    status: str | None = None, failing: Any = None, sort: str | None = None, desc: bool = False,
                    offset: int = 0, limit: int = 50) -> dict:
        """One page of a finished run's cases searched, filtered and sorted (oloproof_core's
        storage.query gives the meaning): ``{"matching": n, "records": [...]}``."""
        q = checked_query(search, criterion, status, failing, sort, desc, offset, limit)
        _, _, seal = self._head(run_id)
        key = self.key if seal is not None and keyed(seal.get("meta")) else None
        order = "DESC" if q["desc"] else ""
        if not q["words"] and not q["status"] and q["failing"] is None and not q["sort"]:
            with self._guard(), self._lock:
                matching = seal["cases"] if seal is not None else self.db.execute(
                    "SELECT count(*) FROM run_cases WHERE run_id = ?", (run_id,)).fetchone()[0]
                rows = self.db.execute(f"SELECT idx, case_id, record, {self.case_sum} FROM run_cases WHERE run_id = ? "
                                       f"ORDER BY idx {order} LIMIT ? OFFSET ?",
                                       (run_id, q["limit"], q["offset"])).fetchall()
            return {"matching": matching, "records": [self._checked(run_id, row, key) for row in rows]}
        with self._index_lock:
            index = self._indexed(run_id, (seal or {}).get("digest") or "")
            where, params = ["c.run_id = ?"], [run_id]
            if q["words"]:
                where.append("c.n IN (SELECT rowid FROM texts WHERE texts MATCH ?)")
                params.append(" ".join(f'"{w}"*' for w in q["words"]))
            cell = "EXISTS (SELECT 1 FROM cells x INDEXED BY cells_case WHERE x.run_id = c.run_id AND x.idx = c.idx AND {})"
            if q["status"] and q["criterion"]:
                where.append(cell.format("x.criterion = ? AND x.rank = ?"))
                params += [q["criterion"], RANK[q["status"]]]
            elif q["status"]:
                where.append(f"({cell.format('x.rank = ?')} OR (? AND c.missing))")
                params += [RANK[q["status"]], int(q["status"] == "missing")]
            if q["failing"] is not None:
                marks = ", ".join("?" * len(q["failing"]))
                where.append(f"(c.missing OR {cell.format(f'x.criterion IN ({marks}) AND x.rank IN (0, 1)')})"
                             if q["failing"] else "c.missing")
                params += q["failing"]
            join, keys = "", "c.idx"
            if q["sort"] == "case":
                keys = f"c.case_id {order}, c.idx"
            elif q["sort"]:
                join = "LEFT JOIN cells s INDEXED BY cells_case ON s.run_id = c.run_id AND s.idx = c.idx AND s.criterion = ?"
                params.insert(0, q["sort"])
                keys = f"COALESCE(s.rank, 5) {order}, COALESCE(s.value, 0) {order}, c.idx"
            body = f"FROM cases c {join} WHERE {' AND '.join(where)}"
            matching = index.execute(f"SELECT count(*) FROM cases c WHERE {' AND '.join(where)}",
                                     params[1:] if join else params).fetchone()[0]
            chosen = [r[0] for r in index.execute(f"SELECT c.idx {body} ORDER BY {keys} {order} LIMIT ? OFFSET ?",
                                                  [*params, q["limit"], q["offset"]])]
        records = {}
        if chosen:
            marks = ", ".join("?" * len(chosen))
            with self._guard(), self._lock:
                rows = self.db.execute(f"SELECT idx, case_id, record, {self.case_sum} FROM run_cases "
                                       f"WHERE run_id = ? AND idx IN ({marks})", (run_id, *chosen)).fetchall()
            records = {row[0]: self._checked(run_id, row, key) for row in rows}
        return {"matching": matching, "records": [records[i] for i in chosen if i in records]}

    def _checked(self, run_id: str, row: tuple, key: bytes | None) -> dict:
        idx, case_id, record, stored = row
        return checked_case(run_id, case_id, (idx, record, stored), lambda: self.run_cases(run_id), self.shown, key)

    def _index_db(self) -> sqlite3.Connection:
        if self._index is None:
            path = self.root / FILE
            try:
                if not os.access(self.root, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
                    raise PermissionError(str(path))
                db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=60)
            except (OSError, sqlite3.OperationalError):  # a store this user may only read: a private index
                handle, name = tempfile.mkstemp(prefix="oloproof-index-", suffix=".db")
                os.close(handle)
                atexit.register(lambda: os.path.exists(name) and os.remove(name))
                db = sqlite3.connect(name, check_same_thread=False, isolation_level=None)
            db.executescript(INDEX)
            self._index = db
        return self._index

    def _indexed(self, run_id: str, digest: str) -> sqlite3.Connection:
        """The index, holding this run (built now from its rows if it does not yet)."""
        index = self._index_db()
        found = index.execute("SELECT digest FROM indexed WHERE run_id = ?", (run_id,)).fetchone()
        if found is not None and found[0] == digest:
            return index
        import json

        index.execute("BEGIN IMMEDIATE")
        try:
            index.execute("DELETE FROM cells WHERE run_id = ?", (run_id,))
            index.execute("DELETE FROM cases WHERE run_id = ?", (run_id,))
            after = -1
            while True:
                with self._guard(), self._lock:
                    rows = self.db.execute("SELECT idx, case_id, record FROM run_cases WHERE run_id = ? AND idx > ? "
                                           "ORDER BY idx LIMIT ?", (run_id, after, BUILD_PAGE)).fetchall()
                if not rows:
                    break
                after = rows[-1][0]
                cases, cells, texts = [], [], []
                for idx, case_id, text in rows:
                    try:
                        record = json.loads(text)
                    except ValueError:  # a damaged row: found unindexed, and refused when read
                        record = {"id": case_id}
                    cases.append((run_id, idx, case_id, int("missing" in record)))
                    cells += [(run_id, idx, *cell) for cell in case_cells(record)]
                    texts.append((idx, " ".join(case_words(case_text(record)))))
                index.executemany("INSERT INTO cases (run_id, idx, case_id, missing) VALUES (?, ?, ?, ?)", cases)
                index.executemany("INSERT INTO cells VALUES (?, ?, ?, ?, ?)", cells)
                index.executemany("INSERT INTO texts (rowid, body) SELECT n, ? FROM cases WHERE run_id = ? AND idx = ?",
                                  [(body, run_id, idx) for idx, body in texts])
            index.execute("INSERT OR REPLACE INTO indexed (run_id, digest) VALUES (?, ?)", (run_id, digest))
        except BaseException:
            index.execute("ROLLBACK")
            raise
        index.execute("COMMIT")
        return index


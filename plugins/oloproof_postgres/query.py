"""The postgres store's answer to ``query_cases``: one page of a run's cases, searched through
the GIN index of each case's words (``case_words``, a ``tsvector``; schema version 4), filtered
and sorted by its judgments' status rank and value (``judgment_rank``, ``judgment_value``), all in
the server. Every record returned is checked against its row's checksum."""

from __future__ import annotations

from typing import Any

from oloproof import STATUS_RANK, checked_case, checked_query, keyed


class Query:
    """``query_cases`` (a part of ``PostgresStore``)."""

    def query_cases(self, run_id: str, search: str | None = None, criterion: str | None = None,
                    status: str | None = None, failing: Any = None, sort: str | None = None, desc: bool = False,
                    offset: int = 0, limit: int = 50) -> dict:
        """One page of a finished run's cases searched, filtered and sorted (oloproof_core's
        storage.query gives the meaning): ``{"matching": n, "records": [...]}``."""
        q = checked_query(search, criterion, status, failing, sort, desc, offset, limit)
        seal = self._head(run_id)
        key = self.key if keyed(seal.get("meta")) else None
        s, order = self.schema, "DESC" if q["desc"] else ""
        columns = "c.idx, c.case_id, c.record, c.checksum"
        if not q["words"] and not q["status"] and q["failing"] is None and not q["sort"]:
            with self._conn() as conn, self._guard():
                rows = conn.execute(f"SELECT {columns} FROM {s}.run_cases c WHERE c.run_id = %s "
                                    f"ORDER BY c.idx {order} LIMIT %s OFFSET %s",
                                    (run_id, q["limit"], q["offset"])).fetchall()
            return {"matching": seal["cases"], "records": [self._checked(run_id, row, key) for row in rows]}
        where, params = ["c.run_id = %s"], [run_id]
        if q["words"]:
            where.append(f"{s}.case_words(c.record) @@ to_tsquery('simple', %s)")
            params.append(" & ".join(f"{w}:*" for w in q["words"]))
        judgments = "(c.record::jsonb)->'judgments'"
        each = (f"SELECT 1 FROM jsonb_each(CASE WHEN jsonb_typeof({judgments}) = 'object' THEN {judgments} "
                "ELSE '{}'::jsonb END) e WHERE ")
        if q["status"] and q["criterion"]:
            where.append(f"{s}.judgment_rank({judgments}->%s) = %s")
            params += [q["criterion"], STATUS_RANK[q["status"]]]
        elif q["status"]:
            where.append(f"(EXISTS ({each}{s}.judgment_rank(e.value) = %s) OR (%s AND (c.record::jsonb) ? 'missing'))")
            params += [STATUS_RANK[q["status"]], q["status"] == "missing"]
        if q["failing"] is not None:
            where.append(f"((c.record::jsonb) ? 'missing' OR EXISTS ({each}e.key = ANY(%s) "
                         f"AND {s}.judgment_rank(e.value) IN (0, 1)))")
            params.append(q["failing"])
        keys, extra = f"c.idx {order}", []
        if q["sort"] == "case":
            keys = f'c.case_id COLLATE "C" {order}, c.idx {order}'
        elif q["sort"]:
            keys = (f"{s}.judgment_rank({judgments}->%s) {order}, {s}.judgment_value({judgments}->%s) {order}, "
                    f"c.idx {order}")
            extra = [q["sort"], q["sort"]]
        body = f"FROM {s}.run_cases c WHERE {' AND '.join(where)}"
        with self._conn() as conn, self._guard():
            matching = conn.execute(f"SELECT count(*) {body}", params).fetchone()[0]
            rows = conn.execute(f"SELECT {columns} {body} ORDER BY {keys} LIMIT %s OFFSET %s",
                                [*params, *extra, q["limit"], q["offset"]]).fetchall()
        return {"matching": matching, "records": [self._checked(run_id, row, key) for row in rows]}

    def _checked(self, run_id: str, row: tuple, key: bytes | None) -> dict:
        idx, case_id, record, stored = row
        return checked_case(run_id, case_id, (idx, record, stored), lambda: self.run_cases(run_id), self.shown, key)

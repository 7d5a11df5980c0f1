"""Both shipped stores pass the conformance kit (oloproof.testing.StoreContract), the local one
on SQLite and the postgres one on the session's real PostgreSQL server."""

from __future__ import annotations

import sqlite3

import pytest

from oloproof import OloproofError
from oloproof.testing import StoreContract


class TestLocalStore(StoreContract):
    @pytest.fixture
    def open_store(self, tmp_path):
        from oloproof_local import LocalStore, Options

        return lambda: LocalStore(Options(), tmp_path)

    @pytest.fixture
    def tamper(self):
        def change(store, what, ident):
            with sqlite3.connect(store.path) as db:
                if what == "case":
                    db.execute("UPDATE run_cases SET record = replace(record, 'question', 'QUESTION') WHERE run_id = ?",
                               (ident,))
                else:
                    db.execute("UPDATE cache SET value = '{\"v\": 99}' WHERE ns = 'kit' AND key = ?", (ident,))
        return change


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def open_store(self, pg_server, pg_schema, tmp_path):
        from oloproof_postgres import Options, PostgresStore

        options = Options(dsn=pg_server.url(), schema=pg_schema)
        PostgresStore(options, tmp_path).init()
        opened = []

        def open_one():
            opened.append(PostgresStore(options, tmp_path))
            return opened[-1]

        yield open_one
        for store in opened:
            store.close()

    @pytest.fixture
    def tamper(self, pg_server):
        import psycopg

        def change(store, what, ident):
            with psycopg.connect(pg_server.url()) as conn:
                if what == "case":
                    conn.execute(f"UPDATE {store.schema}.run_cases SET record = replace(record, 'question', 'QUESTION') "
                                 "WHERE run_id = %s", (ident,))
                else:
                    conn.execute(f"UPDATE {store.schema}.cache SET value = '{{\"v\": 99}}' WHERE ns = 'kit' AND key = %s",
                                 (ident,))
        return change


BROKEN = '''
import pytest
from oloproof import OloproofError
from oloproof.testing import StoreContract
from oloproof_local import LocalStore, Options


class Careless(LocalStore):
    """Writes a run's cases one at a time, outside one transaction, and calls any run latest."""

    def save_run(self, header, cases, summary):
        self.db.execute("INSERT INTO runs (id, created, header, summary) VALUES (?, 0, ?, ?)",
                        (header["id"], __import__("json").dumps(header), __import__("json").dumps(summary)))
        for i, c in enumerate(cases):
            self.db.execute("INSERT INTO run_cases (run_id, idx, case_id, record) VALUES (?, ?, ?, ?)",
                            (header["id"], i, c["id"], __import__("json").dumps(c)))

    def resolve_run(self, prefix):
        if prefix == "latest" and self.list_runs():
            return self.list_runs()[-1]["id"]
        return super().resolve_run(prefix)


class TestCareless(StoreContract):
    @pytest.fixture
    def open_store(self, tmp_path):
        return lambda: Careless(Options(), tmp_path)
'''


@pytest.mark.slow
def test_the_kit_fails_a_store_that_breaks_the_contract(tmp_path):
    import subprocess
    import sys

    (tmp_path / "test_careless.py").write_text(BROKEN, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_careless.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    failed = {line.split("::")[-1].split(" ")[0] for line in proc.stdout.splitlines() if line.startswith("FAILED")}
    assert proc.returncode == 1, proc.stdout
    assert {"test_a_run_is_stored_whole_or_not_at_all", "test_resolve_a_prefix_latest_and_the_errors"} <= failed, proc.stdout
    assert "test_a_run_reads_back_as_written" not in failed



OLD_SCHEMA = """
CREATE TABLE runs (id TEXT PRIMARY KEY, created REAL, header TEXT, summary TEXT, seal TEXT);
CREATE TABLE run_cases (run_id TEXT, idx INTEGER, case_id TEXT, record TEXT, PRIMARY KEY (run_id, idx));
CREATE TABLE cache (ns TEXT, key TEXT, value TEXT, checksum TEXT, PRIMARY KEY (ns, key));
CREATE TABLE objects (id TEXT PRIMARY KEY, kind TEXT, created REAL, record TEXT, checksum TEXT);
"""


@pytest.mark.parametrize("read_only", [True, False])
def test_a_local_store_written_before_streaming_reads_and_checks(tmp_path, read_only):
    """A store as the previous release wrote it (no row checksums, no writers table, the run written
    in one transaction with the same seal) reads, finds one case and checks clean, read-only or not."""
    import json

    from oloproof import seal_of
    from oloproof.testing import SUMMARY, case_records, run_header
    from oloproof_local import LocalStore, Options

    (tmp_path / ".oloproof").mkdir()
    run_id, records = "run_01KIT0000000000000000000V1", case_records(2500)
    header, summary = json.dumps(run_header(run_id, 2500)), json.dumps(SUMMARY)
    rows = [(i, r["id"], json.dumps(r, ensure_ascii=False)) for i, r in enumerate(records)]
    with sqlite3.connect(tmp_path / ".oloproof" / "store.db") as db:
        db.executescript(OLD_SCHEMA)
        seal = json.dumps(seal_of(header, summary, rows))
        db.execute("INSERT INTO runs VALUES (?, 0, ?, ?, ?)", (run_id, header, summary, seal))
        db.executemany("INSERT INTO run_cases VALUES (?, ?, ?, ?)", [(run_id, *row) for row in rows])
    store = LocalStore(Options(), tmp_path)
    store.read_only = read_only
    assert list(store.run_cases(run_id)) == records
    assert store.run_case(run_id, "c1234") == records[1234]
    found = store.check()
    assert found["problems"] == [] and found["counts"]["cases"] == 2500 and found["counts"]["unfinished"] == 0
    with sqlite3.connect(tmp_path / ".oloproof" / "store.db") as db:
        db.execute("UPDATE run_cases SET record = replace(record, 'question', 'QUESTION') WHERE idx = 2400")
    with pytest.raises(OloproofError, match="damaged"):
        store.run_case(run_id, "c2400")  # no row checksum: checked with its whole run

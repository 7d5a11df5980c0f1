"""Both shipped stores pass the conformance kit (oloproof.testing.StoreContract), the local one
on SQLite and the postgres one on the session's real PostgreSQL server."""

from __future__ import annotations

import sqlite3

import pytest

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

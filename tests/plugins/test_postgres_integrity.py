"""The postgres store against a writer and against faults, on the session's real PostgreSQL: a
forged judgment found with the store key, the roles docs/stores.md recommends (created from its
own SQL) running each command, a retried `store copy`, an abort that cannot clean up, a damaged
schema version, an empty schema; through the command line: one damaged run among intact ones,
crafted run ids, a forged case row re-sealed without the key, an abort whose clean-up is refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest
from conftest import case, olo
from test_postgres import run, store_block, team  # noqa: F401 - the team fixture

from oloproof import OloproofError, checksum, write_run

pytestmark = pytest.mark.usefixtures("pg_server")
KEY = "k-" + "0123456789abcdef" * 2
DOCS = Path(__file__).resolve().parents[2] / "docs" / "stores.md"


@pytest.fixture
def echo(project, pg_server, pg_schema):
    """The echo project on a fresh postgres schema (tables made), its dsn in OLOPROOF_DSN, its
    judgments cached (the rows a writer forges)."""
    project.cache_judgments()
    with open(project.root / "oloproof.yaml", "a", encoding="utf-8") as f:
        f.write(store_block(pg_schema))
    project.env = {"OLOPROOF_DSN": pg_server.url()}
    project.schema = pg_schema
    assert project.run("store", "init", env=project.env).code == 0
    return project


def test_with_a_key_a_forged_judgment_is_found_by_check_and_recomputed_by_the_next_run(echo, pg_server):
    env = {**echo.env, "OLOPROOF_STORE_KEY": KEY}
    echo.cases([case(0), case(1, ok=False)])
    first = echo.run("run", env=env)
    assert first.code == 0 and "50.0%" in first.out, first
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:  # a writer with table rights, no key
        rows = conn.execute(f"SELECT key, value FROM {echo.schema}.cache WHERE ns = 'judgment'").fetchall()
        assert rows and all(s.startswith("hmac:") for s, in conn.execute(f"SELECT checksum FROM {echo.schema}.cache"))
        for key, value in rows:
            row = json.loads(value)  # one row a case: its judgments by evaluator identity
            if any(j["status"] != "pass" for j in row.values()):
                text = json.dumps({e: {"status": "pass", "value": 1.0} for e in row}, sort_keys=True)
                conn.execute(f"UPDATE {echo.schema}.cache SET value = %s, checksum = %s WHERE ns = 'judgment' AND key = %s",
                             (text, checksum("judgment", key, text), key))
    checked = echo.run("store", "check", env=env)
    assert checked.code == 2 and "not signed with the store key" in checked.out, checked
    again = echo.run("run", env=env)
    assert again.code == 0 and "50.0%" in again.out and "recomputed (1 judgment)" in again.err, again
    assert echo.run("store", "check", env=env).code == 0


def test_the_documented_roles_work_as_written(team, pg_server):  # noqa: F811 - the fixture
    assert run(team, "store", "init").code == 0
    sql = re.search(r"### Roles.*?```sql\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S).group(1)
    sql = sql.replace("SCHEMA oloproof ", f"SCHEMA {team.schema} ")
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        for role in ("oloproof_writer", "oloproof_reader"):
            conn.execute(f"DROP ROLE IF EXISTS {role}_login")
        conn.execute("DROP OWNED BY oloproof_writer") if conn.execute(
            "SELECT 1 FROM pg_roles WHERE rolname = 'oloproof_writer'").fetchone() else None
        for role in ("oloproof_writer", "oloproof_reader"):
            conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(sql)
        conn.execute("CREATE ROLE oloproof_writer_login LOGIN PASSWORD 'w-secret' IN ROLE oloproof_writer")
        conn.execute("CREATE ROLE oloproof_reader_login LOGIN PASSWORD 'r-secret' IN ROLE oloproof_reader")
    base = pg_server.url().split("@", 1)[1]
    writer = {"OLOPROOF_DSN": f"postgresql://oloproof_writer_login:w-secret@{base}"}
    reader = {"OLOPROOF_DSN": f"postgresql://oloproof_reader_login:r-secret@{base}"}
    assert team.run("run", env=writer).code == 3
    for args in (("run",), ("diagnose", "latest", "--intervention", "gold-context", "--criterion", "answer_correct"),
                 ("cache", "clear", "stage:generate"), ("store", "repair"), ("store", "check")):
        done = team.run(*args, env=writer)
        assert done.code in (0, 3), (args, done)
    # a run that stops after writing case rows removes them, with DELETE (the role's)
    from oloproof.testing import SUMMARY, case_records, run_header
    from oloproof_postgres import Options, PostgresStore

    store = PostgresStore(Options(dsn=writer["OLOPROOF_DSN"], schema=team.schema))

    def stops():
        yield from case_records(3)
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        store.save_run(run_header("run_01KIT0000000000000000000R1", 3), stops(), SUMMARY)
    assert store.check()["unfinished"] == [] and store.check()["problems"] == []
    store.close()
    for args in (("runs",), ("inspect", "latest"), ("export", "latest"), ("store", "check"), ("cache",)):
        done = team.run(*args, env=reader)
        assert done.code == 0, (args, done)
    refused = team.run("run", env=reader)
    assert refused.code == 2 and refused.err.count("\n") == 1 and "permission denied" in refused.err, refused


def test_a_retried_store_copy_resumes_after_an_interruption(project, pg_server, pg_schema):
    from oloproof.testing import case_records
    from oloproof_postgres import Options, PostgresStore

    project.cases([case(i) for i in range(3)])
    for _ in range(2):
        assert project.run("run").code == 0
    ids = project.runs()
    target = "{type: postgres, dsn: '${OLOPROOF_DSN}', schema: " + pg_schema + "}"
    env = {"OLOPROOF_DSN": pg_server.url()}
    assert project.run("store", "init", "--store", target, env=env).code == 0
    store = PostgresStore(Options(dsn=pg_server.url(), schema=pg_schema))
    writer = store.begin_run(ids[0])  # a copy killed while it wrote the first run: rows, a writer row, no lock
    writer.add(case_records(2))
    writer.lock.close()
    store.close()
    copied = project.run("store", "copy", "--to", target, env=env)
    assert copied.code == 0 and "Copied 2 runs" in copied.out, copied
    checked = olo("store", "check", "--store", target, cwd=project.root, env=env)
    assert checked.code == 0 and "2 runs (6 case records)" in checked.out and "Unfinished" not in checked.out, checked


def test_an_abort_that_cannot_clean_up_reports_the_first_error_and_the_next_run_clears(pg_server, pg_schema):
    from oloproof.testing import SUMMARY, case_records, run_header
    from oloproof_postgres import Options, PostgresStore

    options = Options(dsn=pg_server.url(), schema=pg_schema)
    store = PostgresStore(options)
    store.init()

    def refuse(conn, run_id):
        raise OloproofError("permission denied for table run_cases")

    def stops():
        yield from case_records(3)
        raise ValueError("the first error")

    writer = store.begin_run("run_01KIT0000000000000000000A7")
    store._remove_unfinished = refuse  # the abort's DELETE fails (a role without it, a lost connection)
    with pytest.raises(ValueError, match="the first error") as raised:
        write_run(writer, run_header("run_01KIT0000000000000000000A7", 3), stops(), SUMMARY, size=2)
    assert "could not be removed: permission denied" in " ".join(getattr(raised.value, "__notes__", []))
    store.close()
    other = PostgresStore(options)
    left = other.check()["unfinished"]
    assert [(u["run"], u["cases"], u["writing"]) for u in left] == [("run_01KIT0000000000000000000A7", 2, False)]
    other.save_run(run_header("run_01KIT0000000000000000000A8", 1), case_records(1), SUMMARY)
    found = other.check()
    assert found["unfinished"] == [] and found["problems"] == [] and found["counts"]["cases"] == 1
    other.close()


def test_a_damaged_schema_version_is_a_one_line_error(echo, pg_server):
    echo.cases([case(0)])
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute(f"UPDATE {echo.schema}.meta SET value = '3\x1b[31m' WHERE key = 'schema_version'")
    for args in (("runs",), ("run",), ("store", "migrate")):
        done = echo.run(*args, env=echo.env)
        assert done.code == 2 and done.err.count("\n") == 1 and "is not a version number" in done.err, done
        assert "\x1b" not in done.err


def test_an_empty_schema_or_a_missing_table_or_version_is_damage_to_store_check(project, pg_server, pg_schema):
    """As an empty SQLite file is: `store check` lists what is missing as damage, exit 2."""
    env = {"OLOPROOF_DSN": pg_server.url()}
    with open(project.root / "oloproof.yaml", "a", encoding="utf-8") as f:
        f.write(store_block(pg_schema))
    project.cases([case(0), case(1)])
    absent = project.run("store", "check", env=env)  # no schema at all: never created, the usual one line
    assert absent.code == 2 and absent.err.count("\n") == 1 and "tables do not exist" in absent.err, absent

    def sql(statement: str) -> None:
        with psycopg.connect(pg_server.url(), autocommit=True) as conn:
            conn.execute(statement.format(s=pg_schema))

    sql("CREATE SCHEMA {s}")  # created, and empty
    empty = project.run("store", "check", env=env)
    assert empty.code == 2 and f"Damaged: database: schema {pg_schema} holds none of the store's tables" in empty.out, empty
    assert "0 runs" in empty.out and empty.err == ""
    assert project.run("store", "init", env=env).code == 0
    assert project.run("run", env=env).code == 0
    sql("DELETE FROM {s}.meta WHERE key = 'schema_version'")  # the version row gone: the rows are still checked
    versionless = project.run("store", "check", env=env)
    assert versionless.code == 2, versionless
    assert "Damaged: database: the store's schema version is missing from its meta table" in versionless.out
    assert "1 run (2 case records)" in versionless.out and versionless.out.count("Damaged:") == 1, versionless
    repaired = project.run("store", "repair", env=env)
    assert repaired.code == 2 and "Still damaged: database: the store's schema version is missing" in repaired.out, repaired
    from oloproof_postgres.schema import VERSION

    sql(f"INSERT INTO {{s}}.meta (key, value) VALUES ('schema_version', '{VERSION}')")
    assert project.run("store", "check", env=env).code == 0
    sql("DROP TABLE {s}.cache")
    dropped = project.run("store", "check", env=env)
    assert dropped.code == 2 and f"Damaged: database: table {pg_schema}.cache is missing" in dropped.out, dropped
    assert "Traceback" not in dropped.text and dropped.out.count("Damaged:") == 1
    for table in ("runs", "run_cases", "objects", "writers", "meta"):
        sql("DROP TABLE {s}." + table)
    gone = project.run("store", "check", env=env)
    assert gone.code == 2 and "holds none of the store's tables" in gone.out, gone


def test_one_damaged_run_never_hides_the_others_and_crafted_run_ids_are_refused(echo, pg_server, tmp_path):
    """What a writer of the shared store may leave behind: a run changed behind its seal, and rows
    whose ids are paths. The intact runs are listed, `latest` never falls back to an older run, no
    command makes a folder outside the project, `store check` lists them and `store repair` sets them aside."""
    echo.cases([case(0)])
    for _ in range(3):
        assert echo.run("run", env=echo.env).code == 0
    listed = echo.run("runs", env=echo.env)
    ids = sorted(set(re.findall(r"run_[0-9A-Z]{26}", listed.out)))
    assert len(ids) == 3, listed
    s = echo.schema

    def sql(statement: str, *args) -> None:
        with psycopg.connect(pg_server.url(), autocommit=True) as conn:
            conn.execute(statement.format(s=s), args)

    sql("UPDATE {s}.runs SET summary = replace(summary, 'UNGATED', 'PASSED') WHERE id = %s", ids[0])
    listed = echo.run("runs", env=echo.env)
    assert listed.code == 0 and ids[1] in listed.out and ids[2] in listed.out and ids[0] not in listed.out, listed
    assert listed.err.count("\n") == 1 and "1 damaged run not listed" in listed.err and ids[0] in listed.err
    latest = echo.run("inspect", "latest", env=echo.env)
    assert latest.code == 0 and ids[2] in latest.out, latest
    for crafted in ("run_../../../escaped", "../../escaped", "run_x/../../escaped"):
        sql("INSERT INTO {s}.runs (id, created, parent, header, summary, seal) "
            "SELECT %s, created, parent, header, summary, seal FROM {s}.runs WHERE id = %s", crafted, ids[1])
    listed = echo.run("runs", env=echo.env)
    assert listed.code == 0 and "4 damaged runs not listed" in listed.err and "escaped" not in listed.out, listed
    for text in ("run_../../../escaped", "run_..", "../../escaped"):
        exported = echo.run("export", text, env=echo.env)
        assert exported.code == 2 and exported.err.count("\n") == 1, exported
    assert not list(tmp_path.parent.glob("**/escaped")) and not (echo.root / "escaped").exists()
    sql("UPDATE {s}.runs SET header = replace(header, 'echo', 'ECHO') WHERE id = %s", ids[2])
    newest = echo.run("inspect", "latest", env=echo.env)  # the newest run is damaged: an error, never the older run
    assert newest.code == 2 and ids[2] in newest.err and "damaged" in newest.err, newest
    checked = echo.run("store", "check", env=echo.env)
    assert checked.code == 2 and checked.out.count("its id is not a run id oloproof makes") == 3, checked
    assert checked.out.count("Damaged:") == 5, checked
    repaired = echo.run("store", "repair", env=echo.env)
    assert repaired.code == 0 and f"Quarantined: {ids[0]}" in repaired.out and "No damage left" in repaired.out, repaired
    after = echo.run("store", "check", env=echo.env)
    assert after.code == 0 and "Quarantined: 5 runs set aside" in after.out, after
    assert echo.run("runs", env=echo.env).out.count("run_") == 1


def test_with_a_key_a_forged_case_row_and_reseal_are_refused(echo, pg_server):
    from oloproof import row_checksum, seal_of

    env = {**echo.env, "OLOPROOF_STORE_KEY": KEY}
    echo.cases([case(0), case(1, ok=False)])
    first = echo.run("run", env=env)
    assert first.code == 0, first
    run_id = re.search(r"run_[0-9A-Z]{26}", first.out).group()
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:  # a writer without the key re-seals its forgery
        s = echo.schema
        header, summary = conn.execute(f"SELECT header, summary FROM {s}.runs WHERE id = %s", (run_id,)).fetchone()
        rows = conn.execute(f"SELECT idx, case_id, record FROM {s}.run_cases WHERE run_id = %s ORDER BY idx",
                            (run_id,)).fetchall()
        rows = [(i, c, r.replace('"fail"', '"pass"')) for i, c, r in rows]
        for i, c, r in rows:
            conn.execute(f"UPDATE {s}.run_cases SET record = %s, checksum = %s WHERE run_id = %s AND idx = %s",
                         (r, row_checksum(i, c, r), run_id, i))
        conn.execute(f"UPDATE {s}.runs SET seal = %s WHERE id = %s", (json.dumps(seal_of(header, summary, rows)), run_id))
    shown = echo.run("inspect", run_id, "--case", "c001", env=env)
    assert shown.code == 2 and "not signed with the store key" in shown.err, shown
    checked = echo.run("store", "check", env=env)
    assert checked.code == 2 and f"Damaged: run {run_id}: it is not signed with the store key" in checked.out, checked


def test_a_run_whose_abort_cannot_clean_up_reports_the_first_error_and_the_next_run_clears(echo, pg_server):
    """Through the command line: a login with the documented writer rights except INSERT on the
    runs table, so its run fails at the end, and a server that refuses the clean-up's DELETE (a
    trigger raising, as a lost connection or a missing right would). The first error is the one
    printed; the rows and writer row left behind are cleared by the next run."""
    import secrets

    role = f"olo_norun_{secrets.token_hex(3)}"
    s = echo.schema

    def sql(*statements: str) -> None:
        with psycopg.connect(pg_server.url(), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    sql(f"CREATE ROLE {role} LOGIN PASSWORD 'n-secret'", f"GRANT USAGE ON SCHEMA {s} TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {role}",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {role}", f"REVOKE INSERT ON {s}.runs FROM {role}",
        f"CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the clean-up was refused'; END $$",
        f"CREATE TRIGGER refuse BEFORE DELETE ON {s}.run_cases FOR EACH ROW EXECUTE FUNCTION {s}.refuse()")
    try:
        echo.cases([case(0), case(1)])
        limited = {"OLOPROOF_DSN": f"postgresql://{role}:n-secret@{pg_server.url().split('@', 1)[1]}"}
        failed = echo.run("run", env=limited)
        assert failed.code == 2 and failed.err.count("\n") == 1, failed
        assert "permission denied for table runs" in failed.err and "Traceback" not in failed.err, failed
        left = echo.run("store", "check", env=echo.env)
        assert left.code == 0 and "Unfinished: 1 run begun and not finished (2 case records" in left.out, left
        assert "0 runs" in left.out
        sql(f"DROP TRIGGER refuse ON {s}.run_cases")
        done = echo.run("run", env=echo.env)
        assert done.code == 0, done
        clean = echo.run("store", "check", env=echo.env)
        assert clean.code == 0 and "Unfinished" not in clean.out and "1 run (2 case records)" in clean.out, clean
    finally:
        sql(f"DROP OWNED BY {role}", f"DROP ROLE {role}")


def test_store_sign_adopts_a_key_keeping_the_rows_stored_before_it(echo, pg_server):
    env = {**echo.env, "OLOPROOF_STORE_KEY": KEY}
    echo.cases([case(0), case(1, ok=False)])
    first = echo.run("run", env=echo.env)
    assert first.code == 0, first
    run_id = re.search(r"run_[0-9A-Z]{26}", first.out).group()
    assert echo.run("store", "check", env=env).code == 2  # unsigned, with the key
    s = echo.schema
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:  # a value damaged: nothing is signed
        key, value = conn.execute(f"SELECT key, value FROM {s}.cache WHERE ns = 'execution' LIMIT 1").fetchone()
        conn.execute(f"UPDATE {s}.cache SET value = %s WHERE ns = 'execution' AND key = %s", (value + " ", key))
    refused = echo.run("store", "sign", env=env)
    assert refused.code == 2 and refused.err.count("\n") == 1 and "nothing was signed" in refused.err, refused
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        assert not [c for c, in conn.execute(f"SELECT checksum FROM {s}.cache") if c.startswith("hmac:")]
        conn.execute(f"UPDATE {s}.cache SET value = %s WHERE ns = 'execution' AND key = %s", (value, key))
    signed = echo.run("store", "sign", env=env)
    assert signed.code == 0 and "signed 1 run, 4 cached values and 0 objects" in signed.out, signed
    assert echo.run("store", "check", env=env).code == 0
    again = echo.run("run", env=env)
    assert again.code == 0 and "judgment 2 hit/0 miss" in again.out and "recomputed" not in again.err, again
    assert echo.run("inspect", run_id, "--case", "c001", env=env).code == 0

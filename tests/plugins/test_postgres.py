"""The postgres store through the real command line, against the session's PostgreSQL server:
the support_rag example's run -> compare -> diagnose flow, two `oloproof run` processes at once,
a cache one process writes and another reads, schema init and migration, `store copy`, and a
dsn password that never appears anywhere."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from conftest import Project, case, olo

pytestmark = pytest.mark.usefixtures("pg_server")


def store_block(schema: str) -> str:
    return f'\nstore: {{type: postgres, dsn: "${{OLOPROOF_DSN}}", schema: {schema}}}\n'


@pytest.fixture
def team(pg_server, pg_schema, tmp_path):
    """The support_rag example on a fresh postgres schema, its dsn in OLOPROOF_DSN."""
    assert olo("init", "--example", "support_rag", "demo", cwd=tmp_path).code == 0
    project = Project(tmp_path / "demo")
    with open(project.root / "oloproof.yaml", "a", encoding="utf-8") as f:
        f.write(store_block(pg_schema))
    project.env = {"OLOPROOF_DSN": pg_server.url()}
    project.schema = pg_schema
    return project


def run(project: Project, *args: str, **kw):
    return project.run(*args, env=project.env, **kw)


def cache_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(("Cache:", "Stages:"))]


def run_id(out: str) -> str:
    return next(word for line in out.splitlines() for word in line.split() if word.startswith("run_"))


def test_a_run_needs_the_schema_made_by_store_init(team):
    before = run(team, "run")
    assert before.code == 2 and before.err.count("\n") == 1, before
    assert "tables do not exist" in before.err and "oloproof store init" in before.err
    made = run(team, "store", "init")
    assert made.code == 0 and "created, schema version" in made.out, made
    again = run(team, "store", "init")
    assert again.code == 0 and "up to date" in again.out


def flow(project: Project, env: dict) -> list[str]:
    """run, run again, compare, diagnose, inspect: the outputs with ids and timings masked."""
    import re

    outs = []
    first = project.run("run", env=env)
    second = project.run("run", env=env)
    assert (first.code, second.code) == (3, 3), first
    outs += [first.out, second.out]
    compared = project.run("compare", run_id(second.out), run_id(first.out), "--policy", "compare.yaml", env=env)
    assert compared.code in (0, 1, 3) and "sha256:" in compared.out, compared
    diagnosed = project.run("diagnose", "latest", "--intervention", "gold-context", "--criterion", "answer_correct", env=env)
    assert diagnosed.code == 0, diagnosed
    diagnosis = re.search(r"Diagnosis (sha256:[0-9a-f]+)", diagnosed.out).group(1)
    outs += [compared.out, diagnosed.out]
    for args in (("inspect", diagnosis), ("inspect", "latest", "--failures"), ("inspect", "latest", "--case", "money_back"),
                 ("export", "latest"), ("runs",)):
        result = project.run(*args, env=env)
        assert result.code == 0, result
        outs.append(result.out)
    masked = [re.sub(r"sha256:[0-9a-f]+|run_[0-9A-Z]{26}|\d{4}-\d\d-\d\dT[0-9:]+Z|\d+(\.\d+)? ?(ms|s)\b", "<id>", out)
              for out in outs]
    return masked


def test_run_compare_diagnose_inspect_export_match_the_local_store(team, tmp_path):
    """The whole documented flow prints the same on the team store as on the local one."""
    assert run(team, "store", "init").code == 0
    on_postgres = flow(team, team.env)
    assert cache_lines(on_postgres[0]) == ["Cache: execution 0 hit/13 miss; judgment 0 hit/65 miss",
                                           "Stages: retrieve 0 hit/13 miss; generate 0 hit/13 miss"]
    assert cache_lines(on_postgres[1])[0] == "Cache: execution 13 hit/0 miss; judgment 0 hit/65 miss"  # in-process: made again
    assert "CONTEXT_ASSEMBLY_LOSS: 2 of 4" in on_postgres[3]
    assert not (team.root / ".oloproof" / "store.db").exists(), "nothing went to the local store"
    assert olo("init", "--example", "support_rag", "local", cwd=tmp_path).code == 0
    on_local = flow(Project(tmp_path / "local"), {})
    assert on_postgres == on_local
    checked = run(team, "store", "check")
    assert checked.code == 0 and "No damage found" in checked.out, checked
    assert "4 runs (34 case records)" in checked.out  # the suite's two and the diagnosis's two child runs


def test_two_runs_at_once_and_a_cache_shared_between_processes(team, tmp_path):
    assert run(team, "store", "init").code == 0
    team.cache_judgments()  # the judgment cache shared too
    env = {**os.environ, "NO_COLOR": "1", **team.env}
    procs = [subprocess.Popen([sys.executable, "-m", "oloproof", "run"], cwd=team.root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [3, 3], outs
    ids = {run_id(out) for out, _ in outs}
    assert len(ids) == 2
    # another project folder on "another machine": same suite, same team store
    other = Project(tmp_path / "elsewhere")
    assert olo("init", "--example", "support_rag", "elsewhere", cwd=tmp_path).code == 0
    (other.root / "oloproof.yaml").write_text((team.root / "oloproof.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    third = other.run("run", env=team.env)
    assert cache_lines(third.out)[0] == "Cache: execution 13 hit/0 miss; judgment 65 hit/0 miss", third
    checked = run(team, "store", "check")
    assert checked.code == 0 and checked.out.startswith("Store postgres oloproof@127.0.0.1"), checked
    assert "3 runs (39 case records)" in checked.out


def test_the_password_is_never_printed_logged_or_recorded(team, pg_server, tmp_path):
    password = pg_server.password
    outputs = [run(team, "store", "init"), run(team, "run"), run(team, "runs"), run(team, "inspect", "latest"),
               run(team, "export", "latest"), run(team, "store", "check"), run(team, "plugins"),
               run(team, "run", "--debug")]
    assert [r.code for r in outputs] == [0, 3, 0, 0, 0, 0, 0, 3]
    wrong = pg_server.url().replace(password, "not-" + password)
    bad_port = pg_server.url().replace(f":{pg_server.port}/", ":1/")
    errors = [
        olo("runs", cwd=team.root, env={"OLOPROOF_DSN": wrong}),
        olo("runs", cwd=team.root, env={"OLOPROOF_DSN": bad_port}),
        olo("runs", cwd=team.root, env={"OLOPROOF_DSN": f"host=127.0.0.1 password={password} port=notaport"}),
        olo("runs", cwd=team.root, env={"OLOPROOF_DSN": f"host=127.0.0.1 password {password}"}),
        olo("runs", cwd=team.root, env={"OLOPROOF_DSN": pg_server.url("nosuchdb")}),
        olo("runs", "--debug", cwd=team.root, env={"OLOPROOF_DSN": wrong}),
        olo("runs", cwd=team.root, env={}),  # OLOPROOF_DSN unset
        olo("runs", "--store", "{type: postgres, dsn: " + wrong + "}", cwd=tmp_path),
        olo("runs", cwd=tmp_path, env={"OLOPROOF_STORE": f"host=127.0.0.1 password={password}"}),
        olo("runs", cwd=tmp_path, env={"OLOPROOF_STORE": f"pgsql://u:{password}@127.0.0.1/db"}),
    ]
    for result in errors[:5] + errors[6:]:
        assert result.code == 2 and result.out == "" and result.err.count("\n") == 1, result
        assert "; fix: " in result.err
    assert "password authentication failed" in errors[0].err and "PGPASSWORD" in errors[0].err
    assert "could not reach the server" in errors[1].err
    assert "dsn is not valid" in errors[2].err and "invalid integer value" in errors[2].err
    assert "not a PostgreSQL connection string" in errors[3].err
    assert "nosuchdb" in errors[4].err and "createdb" in errors[4].err
    assert "OLOPROOF_DSN is not set" in errors[6].err
    for result in outputs + errors:
        assert password not in result.text, result
    for path in (team.root / ".oloproof").rglob("*"):
        if path.is_file():
            assert password not in path.read_text(encoding="utf-8", errors="replace"), path
    import psycopg

    with psycopg.connect(pg_server.url()) as conn:
        rows = conn.execute(f"SELECT header || summary || seal FROM {team.schema}.runs").fetchall()
        cached = conn.execute(f"SELECT string_agg(value, '') FROM {team.schema}.cache").fetchone()[0]
    assert rows and all(password not in text for text, in rows) and password not in cached


def test_a_newer_or_older_schema_is_a_one_line_error_and_migrate_upgrades(team, pg_server):
    from oloproof_postgres import Options, PostgresStore, schema

    store = PostgresStore(Options(dsn=pg_server.url(), schema=team.schema))
    assert "schema version 1" in store._migrate(create=True, target=1)
    old = run(team, "run")
    assert old.code == 2 and f"version 1, this oloproof needs version {schema.VERSION}" in old.err, old
    assert "oloproof store migrate" in old.err
    migrated = run(team, "store", "migrate")
    assert migrated.code == 0 and f"migrated from schema version 1 to {schema.VERSION}" in migrated.out, migrated
    assert run(team, "run").code == 3
    import psycopg

    with psycopg.connect(pg_server.url()) as conn:
        conn.execute(f"UPDATE {team.schema}.meta SET value = '99' WHERE key = 'schema_version'")
    newer = run(team, "runs")
    assert newer.code == 2 and "newer than this oloproof" in newer.err and "pip install -U" in newer.err, newer
    assert run(team, "store", "migrate").code == 2


def test_store_copy_pushes_local_runs_to_the_team_store_idempotently(project, pg_server, pg_schema):
    project.cases([case(i) for i in range(4)])
    for _ in range(2):
        assert project.run("run").code == 0
    compare = project.write("compare.yaml", """
        version: 1
        rules:
          - {id: same, metric: answer_correct, kind: non-inferiority, margin: 5.0}
    """)
    local = project.runs()
    assert project.run("compare", local[1], local[0], "--policy", compare.name).code in (0, 3)
    team = "{type: postgres, dsn: '${OLOPROOF_DSN}', schema: " + pg_schema + "}"
    env = {"OLOPROOF_DSN": pg_server.url()}
    assert project.run("store", "init", "--store", team, env=env).code == 0
    copied = project.run("store", "copy", "--to", team, env=env)
    assert copied.code == 0 and "Copied 2 runs and 1 objects" in copied.out, copied
    again = project.run("store", "copy", "--to", team, env=env)
    assert again.code == 0 and "Copied 0 runs and 0 objects (2 runs and 1 objects were there already)" in again.out
    # commands without a suite reach the team store through OLOPROOF_STORE
    elsewhere = project.root / "elsewhere"
    elsewhere.mkdir()
    listed = olo("runs", cwd=elsewhere, env={"OLOPROOF_STORE": team, **env})
    assert listed.code == 0 and all(run_id in listed.out for run_id in local), listed
    shown = olo("inspect", local[0], cwd=elsewhere, env={"OLOPROOF_STORE": team, **env})
    assert shown.code == 0 and "Cases: 4" in shown.out, shown
    # and back: the team store into a fresh local store
    back = olo("store", "copy", "--from", team, "--to", "local", cwd=elsewhere, env=env)
    assert back.code == 0 and "Copied 2 runs and 1 objects" in back.out, back
    assert olo("runs", cwd=elsewhere).out.count("run_") == 2
    same = olo("store", "copy", "--to", "local", cwd=elsewhere)
    assert same.code == 2 and "name the same store" in same.err
    mine = olo("store", "copy", "--from", "{type: local, path: ../.oloproof}", "--to", "local", cwd=elsewhere)
    assert mine.code == 0 and "Copied 0 runs and 0 objects (2 runs and 1 objects were there already)" in mine.out, mine
    # a postgresql:// URL names the store in its default schema
    url = pg_server.url()
    assert olo("store", "init", "--store", url, cwd=elsewhere).code == 0
    assert olo("store", "copy", "--to", url, cwd=elsewhere).out.startswith("Copied 2 runs and 1 objects")
    assert olo("runs", "--store", url.replace("postgresql://", "postgres://"), cwd=elsewhere).out.count("run_") == 2


def test_the_viewer_and_the_cache_command_on_the_team_store(team):
    import re
    import signal
    from urllib.request import urlopen

    assert run(team, "store", "init").code == 0
    first = run(team, "run")
    rid = run_id(first.out)
    listed = run(team, "cache")
    assert listed.code == 0 and re.search(r"│ execution +│ 13 +│", listed.out), listed
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **team.env}
    viewer = subprocess.Popen([sys.executable, "-m", "oloproof", "view", "--port", "0"], cwd=team.root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://\S+/", viewer.stdout.readline()).group(0)
        with urlopen(f"{url}runs/{rid}", timeout=30) as page:
            html = page.read().decode("utf-8")
        assert "69.2%" in html and "[38.5%, 91.0%]" in html  # the documented answer_correct row
        with urlopen(f"{url}runs/{rid}/cases/money_back", timeout=30) as page:
            assert "Case money_back" in page.read().decode("utf-8")
        with urlopen(f"{url}runs/{rid}?criterion=answer_correct&status=failed&sort=case&desc=1", timeout=30) as page:
            table = page.read().decode("utf-8").split('<table id="cases">')[1].split("</table>")[0]
            failed = re.findall(r'<tr><td><a href="/runs/[^/]+/cases/([^"]+)"', table)
        assert failed == ["security_review", "seat_count", "refund_review", "money_back"], "the server filters and sorts"
        with urlopen(f"{url}runs/{rid}?q=money_back", timeout=30) as page:  # through the tsvector index
            assert "1 of 13 cases" in page.read().decode("utf-8")
        from urllib.error import HTTPError
        from urllib.request import Request

        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with pytest.raises(HTTPError) as forged:  # DNS rebinding: another name gets no data
            urlopen(Request(f"{url}runs/{rid}", headers={"Host": f"evil.example:{port}"}), timeout=30)
        assert forged.value.code == 421 and rid not in forged.value.read().decode("utf-8")
        forged.value.close()
    finally:
        viewer.send_signal(signal.SIGINT)
        assert viewer.wait(timeout=20) == 0
        viewer.stdout.close()
        viewer.stderr.close()
    cleared = run(team, "cache", "clear", "stage:generate")
    assert cleared.out.strip() == "Cleared stage:generate: 13 entries", cleared


def test_the_viewer_refuses_to_start_on_a_server_it_cannot_reach(tmp_path):
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]  # bound, never listening: the connection is refused
    try:
        result = olo("view", "--port", "0", "--store", f"postgresql://oloproof@127.0.0.1:{port}/nope", cwd=tmp_path,
                     timeout=60)
    finally:
        dead.close()
    assert result.code == 2, result
    assert result.out == "" and result.err.count("\n") == 1 and "could not reach the server" in result.err


@pytest.mark.slow
def test_trials_and_clusters_on_the_team_store_print_what_the_local_store_prints(pg_server, pg_schema, tmp_path):
    """Every trial's record round-trips through postgres: the flaky_rag example's trial run, its
    re-run from the cache, its clustered run and its diagnosis print the same on both stores."""
    outputs = []
    for name, block in (("team", store_block(pg_schema)), ("local", "")):
        assert olo("init", "--example", "flaky_rag", name, cwd=tmp_path).code == 0
        project = Project(tmp_path / name)
        env = {"OLOPROOF_DSN": pg_server.url()}
        for config in ("oloproof.yaml", "clustered.yaml"):
            with open(project.root / config, "a", encoding="utf-8") as f:
                f.write(block)
        if block:
            assert project.run("store", "init", env=env).code == 0
        first = project.run("run", env=env)
        again = project.run("run", env=env)
        clustered = project.run("run", "--config", "clustered.yaml", env=env)
        diagnosed = project.run("diagnose", run_id(first.out), "--intervention", "gold-context", "--criterion",
                                "answer_correct", env=env)
        assert "Unstable: 13 of 26 cases changed verdict across 5 trials" in first.out, first
        assert "Cache: execution 130 hit/0 miss" in again.out, again
        outputs.append([r.out.split("\n", 1)[1] for r in (first, clustered)] +
                       [line for line in diagnosed.out.splitlines() if not line.startswith(
                           ("Diagnosis ", "Child runs", "Cases:", "To test"))])
        if block:
            assert not (project.root / ".oloproof" / "store.db").exists()
    assert outputs[0] == outputs[1]


def test_a_version_2_store_migrates_to_streaming_runs_and_its_runs_still_read_and_check(pg_server, pg_schema):
    """Runs written before version 3 (whole, in one transaction, no row checksums) read, find one
    case and check clean after `migrate`; a run streamed in afterwards sits beside them."""
    import json

    import psycopg

    from oloproof import seal_of
    from oloproof.testing import SUMMARY, case_records, run_header
    from oloproof_postgres import Options, PostgresStore, schema

    store = PostgresStore(Options(dsn=pg_server.url(), schema=pg_schema))
    store._migrate(create=True, target=2)
    run_id, records = "run_01KIT0000000000000000000W1", case_records(2500)
    header, summary = json.dumps(run_header(run_id, 2500)), json.dumps(SUMMARY)
    rows = [(i, r["id"], json.dumps(r, ensure_ascii=False)) for i, r in enumerate(records)]
    with psycopg.connect(pg_server.url()) as conn:  # as version 2 wrote a run
        conn.execute(f'INSERT INTO "{pg_schema}".runs (id, created, parent, header, summary, seal) '
                     "VALUES (%s, 0, NULL, %s, %s, %s)", (run_id, header, summary, json.dumps(seal_of(header, summary, rows))))
        with conn.cursor() as cur, cur.copy(f'COPY "{pg_schema}".run_cases (run_id, idx, case_id, record) FROM STDIN') as copy:
            for row in rows:
                copy.write_row((run_id, *row))
    assert f"migrated from schema version 2 to {schema.VERSION}" in store.migrate()
    assert list(store.run_cases(run_id)) == records
    assert store.run_case(run_id, "c1234") == records[1234]
    found = store.query_cases(run_id, search="question 1234", sort="case")
    assert [r["id"] for r in found["records"]] == ["c1234"], "rows stored before version 4 are in its index"
    store.save_run(run_header("run_01KIT0000000000000000000W2", 3), iter(case_records(3)), SUMMARY)
    found = store.check()
    assert found["problems"] == [] and found["counts"]["cases"] == 2503 and found["counts"]["unfinished"] == 0
    store.close()

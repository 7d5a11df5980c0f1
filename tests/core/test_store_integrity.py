"""The local store against a writer and against faults, through the command line: keyed
checksums (a forged judgment is found by `store check` and refused by the next run), a byte that
breaks UTF-8, `store repair`, an empty file, a damaged run among intact ones, crafted run ids and
a read-only store whose -shm file is missing (docs/stores.md)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import case

from oloproof import checksum

KEY = "k-" + "0123456789abcdef" * 2


def db(project):
    return sqlite3.connect(project.root / ".oloproof" / "store.db", isolation_level=None)



def forge_judgments(project) -> int:
    """What a writer with table rights and no key does: every failing judgment turned into a pass,
    with the plain sha256 checksum that was all the store asked for."""
    forged = 0
    with db(project) as con:
        for key, value in con.execute("SELECT key, value FROM cache WHERE ns = 'judgment'").fetchall():
            row = json.loads(value)  # one row a case: its judgments by evaluator identity
            if any(j["status"] != "pass" for j in row.values()):
                text = json.dumps({e: {"status": "pass", "value": 1.0} for e in row}, sort_keys=True)
                con.execute("UPDATE cache SET value = ?, checksum = ? WHERE ns = 'judgment' AND key = ?",
                            (text, checksum("judgment", key.hex(), text), key))
                forged += 1
    return forged


def test_without_a_key_a_writer_can_forge_a_judgment(project):
    """The documented limit of unkeyed checksums: they find damage, not forgery."""
    project.cache_judgments()
    project.cases([case(0), case(1, ok=False)])
    assert project.run("run").code == 0 and "50.0%" in project.run("inspect", "latest").out
    assert forge_judgments(project) == 1
    assert project.run("store", "check").code == 0
    assert "100.0%" in project.run("run").out  # the forgery passes: why stores.md says to set a key


@pytest.mark.parametrize("where", ["env", "file"])
def test_with_a_key_a_forged_judgment_is_found_by_check_and_recomputed_by_the_next_run(project, where):
    project.cache_judgments()
    env = {"OLOPROOF_STORE_KEY": KEY} if where == "env" else {}
    if where == "file":
        project.write(".oloproof/key", KEY + "\n")
    project.cases([case(0), case(1, ok=False)])
    first = project.run("run", env=env)
    assert first.code == 0 and "50.0%" in first.out, first
    with db(project) as con:
        sums = [r[0] for r in con.execute("SELECT checksum FROM cache UNION ALL SELECT checksum FROM run_cases "
                                          "UNION ALL SELECT json_extract(seal, '$.meta') FROM runs")]
    assert sums and all(s.startswith("hmac:") for s in sums)
    assert project.run("store", "check", env=env).code == 0
    assert forge_judgments(project) == 1
    checked = project.run("store", "check", env=env)
    assert checked.code == 2 and "Damaged: cache judgment" in checked.out and "not signed with the store key" in checked.out
    again = project.run("run", env=env)
    assert again.code == 0 and "50.0%" in again.out, again  # recomputed: the FAIL stays a FAIL
    assert "failed their checksum and were recomputed (1 judgment)" in again.err
    assert "judgment 1 hit/1 miss" in again.out
    assert project.run("store", "check", env=env).code == 0  # the recomputed value replaced the forged one


def test_with_a_key_a_forged_case_row_and_reseal_are_refused(project):
    env = {"OLOPROOF_STORE_KEY": KEY}
    project.cases([case(0), case(1, ok=False)])
    run_id = project.run("run", env=env).out.split()[1]
    with db(project) as con:  # rewrite the failing case and re-seal the run, as a writer without the key would
        from oloproof import row_checksum, seal_of

        header, summary = con.execute("SELECT header, summary FROM runs").fetchone()
        rows = con.execute("SELECT idx, case_id, record FROM run_cases ORDER BY idx").fetchall()
        rows = [(i, c, r.replace('"fail"', '"pass"')) for i, c, r in rows]
        for i, c, r in rows:
            con.execute("UPDATE run_cases SET record = ?, checksum = ? WHERE idx = ?", (r, row_checksum(i, c, r), i))
        con.execute("UPDATE runs SET seal = ?", (json.dumps(seal_of(header, summary, rows)),))
    shown = project.run("inspect", run_id, "--case", "c001", env=env)
    assert shown.code == 2 and "not signed with the store key" in shown.err, shown
    checked = project.run("store", "check", env=env)
    assert checked.code == 2 and f"Damaged: run {run_id}: it is not signed with the store key" in checked.out
    unkeyed = project.run("inspect", run_id, "--case", "c001")  # without the key: the forgery reads (documented)
    assert unkeyed.code == 0
    short = project.run("runs", env={"OLOPROOF_STORE_KEY": "short"})
    assert short.code == 2 and "shorter than 16 characters" in short.err


def test_a_byte_breaking_utf8_is_listed_and_no_longer_blocks_a_run_and_repair_fixes_it(project):
    project.cases([case(i) for i in range(3)])
    assert project.run("run").code == 0
    assert project.run("run").code == 0
    ids = project.runs()
    with db(project) as con:
        keys = [r[0] for r in con.execute("SELECT key FROM cache WHERE ns = 'execution' ORDER BY key")]
        con.execute("UPDATE cache SET value = CAST(? AS TEXT) WHERE ns = 'execution' AND key = ?", (b'{"x": "\xff"}', keys[0]))
        con.execute("UPDATE cache SET value = '{}' WHERE ns = 'execution' AND key = ?", (keys[1],))
        con.execute("UPDATE run_cases SET record = CAST(CAST(record AS BLOB) || X'FE' AS TEXT) WHERE run_id = ? AND idx = 0",
                    (ids[0],))
    checked = project.run("store", "check")
    damaged = [line for line in checked.out.splitlines() if line.startswith("Damaged:")]
    assert checked.code == 2 and len(damaged) == 3, checked  # every one listed: the bad bytes did not stop it
    assert f"Damaged: run {ids[0]}: its case records do not match its seal" in damaged
    run = project.run("run")
    assert run.code == 0 and "execution 1 hit/2 miss" in run.out, run
    assert "failed their checksum and were recomputed (2 execution)" in run.err
    listed = project.run("runs")
    assert listed.code == 0 and ids[1] in listed.out and ids[0] in listed.out  # its header is intact
    repaired = project.run("store", "repair")
    assert repaired.code == 0 and f"Quarantined: {ids[0]}" in repaired.out and "No damage left" in repaired.out, repaired
    after = project.run("store", "check")
    assert after.code == 0 and "Quarantined: 1 run set aside" in after.out, after
    assert ids[0] not in project.run("runs").out
    gone = project.run("inspect", ids[0])
    assert gone.code == 2 and "no run" in gone.err


def test_one_damaged_run_never_hides_the_others(project):
    project.cases([case(0)])
    for _ in range(3):
        assert project.run("run").code == 0
    ids = project.runs()
    with db(project) as con:
        con.execute("UPDATE runs SET summary = replace(summary, 'UNGATED', 'PASSED') WHERE id = ?", (ids[0],))
    listed = project.run("runs")
    assert listed.code == 0 and ids[1] in listed.out and ids[2] in listed.out and ids[0] not in listed.out, listed
    assert listed.err.count("\n") == 1 and "1 damaged run not listed" in listed.err and ids[0] in listed.err
    latest = project.run("inspect", "latest")
    assert latest.code == 0 and ids[2] in latest.out
    with db(project) as con:
        con.execute("UPDATE runs SET header = replace(header, 'echo', 'ECHO') WHERE id = ?", (ids[2],))
    newest = project.run("inspect", "latest")  # the newest run is damaged: an error, never the older run
    assert newest.code == 2 and ids[2] in newest.err and "damaged" in newest.err, newest


def test_crafted_run_ids_are_never_listed_resolved_or_exported(project, tmp_path):
    project.cases([case(0)])
    assert project.run("run").code == 0
    with db(project) as con:
        row = con.execute("SELECT header, summary, seal FROM runs").fetchone()
        for crafted in ("run_../../../escaped", "../../escaped", "run_x/../../escaped"):
            con.execute("INSERT INTO runs (id, created, header, summary, seal) VALUES (?, 0, ?, ?, ?)", (crafted, *row))
    listed = project.run("runs")
    assert listed.code == 0 and "3 damaged runs not listed" in listed.err and "escaped" not in listed.out
    for text in ("run_../../../escaped", "run_..", "../../escaped"):
        exported = project.run("export", text)
        assert exported.code == 2 and exported.err.count("\n") == 1, exported
    assert not list(tmp_path.parent.glob("**/escaped")) and not (project.root / "escaped").exists()
    checked = project.run("store", "check")
    assert checked.code == 2 and checked.out.count("its id is not a run id oloproof makes") == 3, checked
    assert project.run("store", "repair").code == 0 and project.run("store", "check").code == 0


def test_an_empty_store_file_is_damage(project):
    project.cases([case(0)])
    assert project.run("run").code == 0
    (project.root / ".oloproof" / "store.db").write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        (project.root / ".oloproof" / f"store.db{suffix}").unlink(missing_ok=True)
    checked = project.run("store", "check")
    assert checked.code == 2 and "Damaged: database: the file is empty (0 bytes)" in checked.out, checked


def test_a_read_only_store_without_its_shm_reads_its_wal_through_a_private_copy(project, tmp_path, monkeypatch):
    """SQLite cannot make the -shm file in a folder it may not write: the main file alone is stale
    (the newest run is still in the -wal file), so it is read through a private copy, WAL included."""
    import shutil

    from oloproof_local import LocalStore, Options

    project.cases([case(0)])
    assert project.run("run").code == 0
    assert project.run("run").code == 0
    ids = project.runs()
    frozen = tmp_path / "frozen"
    (frozen / ".oloproof").mkdir(parents=True)
    keep = sqlite3.connect(project.root / ".oloproof" / "store.db")  # a reader holds the WAL open
    keep.execute("PRAGMA wal_autocheckpoint=0")
    keep.execute("SELECT count(*) FROM runs").fetchone()
    writer = LocalStore(Options(), project.root)
    from oloproof.testing import SUMMARY, case_records, run_header

    writer.save_run(run_header("run_01ZZZ0000000000000000000Z9", 1), case_records(1), SUMMARY)
    for name in ("store.db", "store.db-wal"):  # the store as it is on disk, without its -shm file
        shutil.copyfile(project.root / ".oloproof" / name, frozen / ".oloproof" / name)
    writer.close()
    keep.close()
    assert (frozen / ".oloproof" / "store.db-wal").stat().st_size > 0
    real = sqlite3.connect

    def unwritable(target, *args, **kw):  # what a folder this process may not write does to mode=ro
        if str(frozen) in str(target) and "mode=ro" in str(target):
            raise sqlite3.OperationalError("unable to open database file")
        return real(target, *args, **kw)

    monkeypatch.setattr(sqlite3, "connect", unwritable)
    reader = LocalStore(Options(), frozen)
    reader.read_only = True
    assert [h["id"] for h in reader.list_runs()] == [*ids, "run_01ZZZ0000000000000000000Z9"]
    assert reader.resolve_run("latest") == "run_01ZZZ0000000000000000000Z9"
    assert reader._copy and str(frozen) not in reader._copy
    assert not (frozen / ".oloproof" / "store.db-shm").exists()


def unprivileged(argv: list[str]) -> list[str]:
    """``argv`` run so that it may not write a folder it does not own the write bit of: as root,
    without the capabilities that let root write anywhere (setpriv); otherwise as it is."""
    import os
    import shutil

    if os.geteuid() != 0:
        return argv
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a folder cannot be made unwritable to the command")
    caps = "-dac_override,-dac_read_search,-fowner,-linux_immutable"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", *argv]


@pytest.mark.slow
def test_a_read_only_store_without_its_shm_is_read_whole_through_the_command_line(project, tmp_path):
    """The same store as it is on a read-only mount or in a folder of another user, read by the
    real commands: `runs`, `inspect latest`, `store check` and the viewer all see the newest run,
    which only the -wal file holds, and nothing is written into the folder."""
    import os
    import re
    import shutil
    import signal
    import subprocess
    import sys
    import urllib.request

    project.cases([case(0)])
    assert project.run("run").code == 0
    keep = sqlite3.connect(project.root / ".oloproof" / "store.db")  # a reader holds the WAL open
    keep.execute("PRAGMA wal_autocheckpoint=0")
    keep.execute("SELECT count(*) FROM runs").fetchone()
    newest = project.run("run")
    assert newest.code == 0, newest
    newest = re.search(r"run_[0-9A-Z]{26}", newest.out).group()
    frozen = tmp_path / "frozen"
    shutil.copytree(project.root, frozen, ignore=shutil.ignore_patterns("store.db-shm", "__pycache__", "frozen"))
    keep.close()
    store = frozen / ".oloproof"
    assert (store / "store.db-wal").stat().st_size > 0 and not (store / "store.db-shm").exists()
    alone = sqlite3.connect(f"{(store / 'store.db').as_uri()}?immutable=1", uri=True)
    assert newest not in [r[0] for r in alone.execute("SELECT id FROM runs")]  # the main file alone is stale
    alone.close()
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}

    def olo_ro(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(unprivileged([sys.executable, "-m", "oloproof", *args]), cwd=frozen, env=env,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    before = sorted(p.name for p in store.iterdir())
    os.chmod(store, 0o555)
    try:
        probe = olo_ro("--version")
        assert probe.returncode == 0, probe
        denied = subprocess.run(unprivileged(["touch", str(store / "probe")]), capture_output=True)
        assert denied.returncode != 0, "the folder is writable to the command: the test would prove nothing"
        listed = olo_ro("runs")
        assert listed.returncode == 0 and newest in listed.stdout and listed.stdout.count("run_") == 2, listed
        latest = olo_ro("inspect", "latest")
        assert latest.returncode == 0 and latest.stdout.startswith(f"Run {newest} "), latest
        checked = olo_ro("store", "check")
        assert checked.returncode == 0 and "2 runs (2 case records)" in checked.stdout, checked
        viewer = subprocess.Popen(unprivileged([sys.executable, "-m", "oloproof", "view", "--port", "0"]), cwd=frozen,
                                  env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        try:
            line = viewer.stdout.readline()
            port = re.search(r"http://\S+:(\d+)/", line)
            assert port, (line, viewer.stderr.read() if viewer.poll() is not None else "")
            with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/", timeout=30) as page:
                assert page.status == 200 and newest in page.read().decode("utf-8")
        finally:
            viewer.send_signal(signal.SIGINT)
            assert viewer.wait(timeout=30) == 0
            viewer.stdout.close()
            viewer.stderr.close()
    finally:
        os.chmod(store, 0o755)
    assert sorted(p.name for p in store.iterdir()) == before  # no -shm made, nothing written


def test_a_database_without_the_stores_tables_is_damage(project):
    project.cases([case(0)])
    assert project.run("run").code == 0
    with db(project) as con:
        con.execute("DROP TABLE cache")
    dropped = project.run("store", "check")
    assert dropped.code == 2 and "Damaged: database: table cache is missing" in dropped.out, dropped
    with db(project) as con:
        for table in ("runs", "run_cases", "objects", "writers"):
            con.execute(f"DROP TABLE {table}")
    gone = project.run("store", "check")
    assert gone.code == 2 and "Damaged: database: the file holds none of the store's tables" in gone.out, gone
    assert gone.out.count("Damaged:") == 1


def test_store_sign_adopts_a_key_keeping_the_rows_stored_before_it(project):
    env = {"OLOPROOF_STORE_KEY": KEY}
    project.cache_judgments()
    project.cases([case(0), case(1, ok=False)])
    first = project.run("run")
    assert first.code == 0 and project.run("run").code == 0
    old = project.runs()
    project.write("compare.yaml", "version: 1\nconfidence_level: 0.95\nblock_on: [FAIL]\nrules:\n"
                  "  - {id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0}\n")
    assert project.run("compare", old[0], old[1], "--policy", "compare.yaml").code in (0, 3)  # an object too
    nokey = project.run("store", "sign")
    assert nokey.code == 2 and nokey.err.count("\n") == 1 and "no store key is set" in nokey.err, nokey
    before = project.run("store", "check", env=env)
    assert before.code == 2 and "not signed with the store key" in before.out
    with db(project) as con:  # a value damaged (its plain checksum no longer holds): signing is refused
        key, value = con.execute("SELECT key, value FROM cache WHERE ns = 'execution' LIMIT 1").fetchone()
        con.execute("UPDATE cache SET value = ? WHERE ns = 'execution' AND key = ?", (value.replace("answer", "ANSWER"), key))
    refused = project.run("store", "sign", env=env)
    assert refused.code == 2 and refused.err.count("\n") == 1, refused
    assert "does not match its checksum: nothing was signed" in refused.err, refused
    with db(project) as con:
        assert all(not s.startswith("hmac:") for s, in con.execute("SELECT checksum FROM cache"))
        con.execute("UPDATE cache SET value = ? WHERE ns = 'execution' AND key = ?", (value, key))
    signed = project.run("store", "sign", env=env)
    assert signed.code == 0, signed
    assert "signed 2 runs, 4 cached values and 1 object with the store key" in signed.out and "No damage found" in signed.out
    with db(project) as con:
        sums = [r[0] for r in con.execute("SELECT checksum FROM cache UNION ALL SELECT checksum FROM run_cases "
                                          "UNION ALL SELECT checksum FROM objects "
                                          "UNION ALL SELECT json_extract(seal, '$.meta') FROM runs")]
    assert sums and all(s.startswith("hmac:") for s in sums)
    assert project.run("store", "check", env=env).code == 0
    again = project.run("run", env=env)
    assert again.code == 0 and "judgment 2 hit/0 miss" in again.out and "recomputed" not in again.err, again
    shown = project.run("inspect", old[0], "--case", "c001", env=env)
    assert shown.code == 0, shown
    assert "signed 0 runs, 0 cached values and 0 objects" in project.run("store", "sign", env=env).out  # idempotent
    forged = forge_judgments(project)  # after signing, the plain checksum a writer recomputes is refused again
    assert forged == 1 and project.run("store", "check", env=env).code == 2

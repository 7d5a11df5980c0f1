"""Hostile and broken input, a broken environment, a damaged store: always one line saying what,
where and how to fix it, exit 2, never a traceback; a bug in Oloproof exits 70, not a gate's code."""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import case

GOOD = [case(i) for i in range(12)]


def one_line(result, expected: str, code: int = 2) -> str:
    assert result.code == code, result
    assert "Traceback" not in result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert expected in lines[0], lines[0]
    return lines[0]


def fails(project, expected: str, *args: str) -> str:
    line = one_line(project.run(*(args or ("run",))), expected)
    assert project.runs() == []
    return line


# -- files that are not what they should be ----------------------------------------------------


@pytest.mark.slow
def test_a_non_utf8_byte_in_the_config_or_the_cases(project):
    project.cases(GOOD)
    (project.root / "oloproof.yaml").write_bytes((project.root / "oloproof.yaml").read_bytes() + b"# caf\xe9\n")
    fails(project, "oloproof.yaml:8:6: not UTF-8 text: byte 0xe9; fix: save the file as UTF-8")
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_bytes()[:-8].decode())
    (project.root / "cases.jsonl").write_bytes(b'{"id": "a", "input": {}}\n{"id": "b", "input": {"q": "\xff"}}\n')
    fails(project, "cases.jsonl:2: not UTF-8 text: byte 0xff at column 29")


@pytest.mark.slow
def test_directories_where_files_belong(project):
    project.cases(GOOD)
    fails(project, ".: a directory, not a file; fix: name the file inside it", "run", "--config", ".")
    (project.root / "policies").mkdir()
    with (project.root / "oloproof.yaml").open("a") as handle:
        handle.write("policy: policies\n")
    fails(project, "policies: a directory, not a file")
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text().replace("policy: policies\n", ""))
    (project.root / "cases.jsonl").unlink()
    (project.root / "cases.jsonl").mkdir()
    fails(project, "cases.jsonl: a directory, not a file")


def test_a_symlink_loop(project):
    os.symlink("loop-b.yaml", project.root / "loop-a.yaml")
    os.symlink("loop-a.yaml", project.root / "loop-b.yaml")
    fails(project, "loop-a.yaml: cannot read it: too many levels of symbolic links", "run", "--config", "loop-a.yaml")


@pytest.mark.parametrize("text", ["a: " + "[" * 10_000 + "]" * 10_000 + "\n",  # flow style
                                  "a:\n" + "- " * 10_000 + "x\n"])  # block style
def test_yaml_nested_ten_thousand_deep_is_refused_before_parsing(project, text):
    project.write("deep.yaml", text)
    start = time.monotonic()
    fails(project, "deep.yaml:", "run", "--config", "deep.yaml")
    assert time.monotonic() - start < 20


def test_json_nested_ten_thousand_deep(project):
    project.write("cases.jsonl", '{"id": "a", "input": {"q": ' + "[" * 10_000 + "]" * 10_000 + "}}\n")
    fails(project, "cases.jsonl:1: nested more than 64 levels deep")


BOMB = "".join(f"{a}: &{a} [{', '.join([f'*{b}'] * 9)}]\n" for b, a in zip("abcdefgh", "bcdefghi"))


def test_a_yaml_alias_bomb_fails_fast(project):
    project.write("bomb.yaml", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + BOMB)
    assert len((project.root / "bomb.yaml").read_bytes()) < 410
    start = time.monotonic()
    fails(project, "bomb.yaml:6:8: its aliases expand to more than 100,000 values", "run", "--config", "bomb.yaml")
    assert time.monotonic() - start < 10


@pytest.mark.slow
def test_aliases_within_the_limit_are_read(project):
    project.cases(GOOD)
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text().replace(
        "  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}",
        "  - &judge {type: contains, criterion: answer_correct, field: answer, expected_field: answer}\n"
        "  - {<<: *judge, criterion: answer_again}"))
    result = project.run("run")
    assert result.code == 0, result
    assert "answer_again" in result.out


def test_a_case_line_over_16_mb_is_refused(project):
    with (project.root / "cases.jsonl").open("w") as handle:
        handle.write(json.dumps(case(1)) + "\n")
        handle.write('{"id": "big", "input": {"q": "' + "x" * 16_000_000 + '"}}\n')
    fails(project, "cases.jsonl:2: the line is longer than 16 MB")


def test_a_large_config_file_is_refused_unread(project):
    project.write("big.yaml", "# " + "x" * 2_000_000 + "\n")
    fails(project, "big.yaml: the file is larger than 1 MB", "run", "--config", "big.yaml")


@pytest.mark.parametrize(("line", "expected"), [
    ('{"id": "a", "input": {"q": NaN}}', "cases.jsonl:1: invalid JSON: NaN is not a JSON number"),
    ('{"id": "a", "input": {"q": -Infinity}}', "cases.jsonl:1: invalid JSON: -Infinity is not a JSON number"),
    ('{"id": "a", "input": {"q": -1e400}}', "cases.jsonl:1: invalid JSON: -1e400 is too large for a number"),
    ('{"id": "a", "input": {"q": 1, "q": 2}}', "cases.jsonl:1: invalid JSON: duplicate key 'q'"),
    ('{"id": "a", "id": "b", "input": {}}', "cases.jsonl:1: invalid JSON: duplicate key 'id'"),
    ('{"id": "a\\ud800", "input": {}}', "cases.jsonl:1: $.id: a lone surrogate escape is not text"),
    ('{"id": "a", "input": {"q": ["x\\udc00"]}}', "cases.jsonl:1: $.input.q[0]: a lone surrogate escape is not text"),
])
def test_strict_json_in_cases(project, line, expected):
    project.write("app.py", "from oloproof import system\n\n@system(name='e', version='1')\ndef run(input):\n"
                            "    open('executed', 'a').write('x')\n    return {'answer': 'x'}\n")
    project.write("cases.jsonl", json.dumps(case(1)) + "\n" + line + "\n")
    fails(project, expected.replace(":1:", ":2:"))
    assert not (project.root / "executed").exists()  # caught before anything ran


@pytest.mark.slow
def test_a_valid_surrogate_pair_is_text(project):
    project.write("cases.jsonl", '{"id": "a", "input": {"q": "smile \\ud83d\\ude00"}, "expected": {"answer": "smile"}}\n')
    result = project.run("run")
    assert result.code == 0, result


def test_strict_json_in_labels(project):
    project.cases(GOOD)
    project.write("labels.jsonl", '{"id": "c001", "label": true, "label": false}\n')
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    one_line(result, "labels.jsonl:1: invalid JSON: duplicate key 'label'")


@pytest.mark.slow
def test_invalid_yaml_in_a_diagnose_option(project):
    project.cases(GOOD)
    assert project.run("run").code == 0
    result = project.run("diagnose", "latest", "--intervention", "top-k", "--criterion", "answer_correct",
                         "--option", "k=[oops")
    one_line(result, "--option k: invalid YAML value '[oops'")


@pytest.mark.slow
def test_negative_limits_are_refused_at_load(project):
    project.cases(GOOD)
    base = (project.root / "oloproof.yaml").read_text()
    project.write("oloproof.yaml", base + "min_slice_support: -5\n")
    fails(project, "oloproof.yaml:8:1: $.min_slice_support: min_slice_support must be at least 0, got -5")
    project.write("oloproof.yaml", base + "policy:\n  version: 1\n  rules:\n"
                  "    - {id: none, metric: answer_correct, kind: observed_count, max_failures: -1}\n")
    fails(project, "$.policy.rules[0].max_failures: max_failures must be at least 0, got -1")


# -- the environment and the store ---------------------------------------------------------------


def limited(project, limit: int, *args: str):
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run([sys.executable, "-m", "oloproof", *args], cwd=project.root, env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=preexec)

    class Result:
        code, out, err = proc.returncode, proc.stdout, proc.stderr
        text = proc.stdout + proc.stderr

    return Result


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_store_stays_sound(project):
    project.cases([case(i, pad="x" * 400) for i in range(300)])
    result = limited(project, 40_000, "run")
    one_line(result, ".oloproof/store.db: the store could not be used:")
    assert "ulimit -f" in result.err
    check = project.run("store", "check")
    assert check.code == 0, check
    assert project.run("run").code == 0


@pytest.mark.slow
def test_a_full_disk_during_export(project):
    project.cases([case(i, pad="x" * 400) for i in range(100)])
    assert project.run("run").code == 0
    result = limited(project, 20_000, "export", "latest")
    one_line(result, "fix: raise the file size limit (ulimit -f)")


@pytest.mark.slow
def test_a_corrupt_database_file(project):
    project.cases(GOOD)
    (project.root / ".oloproof").mkdir()
    (project.root / ".oloproof" / "store.db").write_bytes(b"this is not a database" * 100)
    for args in (("run",), ("runs",), ("store", "check")):
        one_line(project.run(*args), ".oloproof/store.db: the store could not be used: file is not a database; "
                                     "fix: run `oloproof store check`")


def read_only(project, *args: str):
    """Run a command with .oloproof/ read-only: a read-only bind mount when we are root (root ignores
    file modes), else the folder's mode."""
    folder = project.root / ".oloproof"
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return project.run(*args)
        finally:
            folder.chmod(0o755)
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare to make a read-only mount as root")
    script = (f'mount --bind "{folder}" "{folder}" && mount -o remount,ro,bind "{folder}" "{folder}" && '
              f'exec "{sys.executable}" -m oloproof "$@"')
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *args], cwd=project.root, env=env,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and "unshare" in proc.stderr:
        pytest.skip(f"unshare is not allowed here: {proc.stderr.strip()}")

    class Result:
        code, out, err = proc.returncode, proc.stdout, proc.stderr
        text = proc.stdout + proc.stderr

    return Result


@pytest.mark.slow
def test_a_read_only_store_still_reads(project):
    project.cases(GOOD)
    first = project.run("run")
    assert first.code == 0, first
    run_id = project.runs()[0]
    for name in ("store.db-wal", "store.db-shm"):  # as after the last writer closed
        (project.root / ".oloproof" / name).unlink(missing_ok=True)
    listed = read_only(project, "runs")
    assert listed.code == 0 and run_id in listed.out, listed
    shown = read_only(project, "inspect", run_id)
    assert shown.code == 0 and "Cases: 12" in shown.out, shown
    case_shown = read_only(project, "inspect", run_id, "--case", "c003")
    assert case_shown.code == 0, case_shown
    assert read_only(project, "store", "check").code == 0
    one_line(read_only(project, "run"), ".oloproof/store.db: the store could not be used:")


CRASH = """
import sys
from oloproof_core import cli

@cli.cli.command()
def crash():
    raise RuntimeError("an invariant broke")

cli.main()
"""


def test_a_bug_exits_70_with_a_hint_not_a_gates_code(tmp_path):
    import subprocess

    for debug in ((), ("--debug",)):
        proc = subprocess.run([sys.executable, "-c", CRASH, "crash", *debug], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 70, proc
        last = proc.stderr.strip().splitlines()[-1]
        assert last == ("error: internal error: RuntimeError: an invariant broke; this is a bug: rerun with --debug "
                        "for the traceback and report it"), proc.stderr
        assert ("Traceback" in proc.stderr) == bool(debug)


def test_a_system_module_that_fails_to_import_is_the_users_error(project):
    project.cases(GOOD)
    project.write("app.py", "1 / 0\n")
    fails(project, "$.system.callable: importing module 'app' failed: ZeroDivisionError: division by zero")


def test_a_project_file_named_like_a_dependency_shadows_nothing(project):
    """The system imports an installed package the run has not imported yet (jinja2, the
    viewer's): the installed one comes first, not the project's file of the same name."""
    project.cases(GOOD)
    project.write("jinja2.py", "raise SystemExit('the project jinja2.py was imported')\n")
    project.write("app.py", "from oloproof import system\n\n@system(name='e', version='1')\ndef run(input):\n"
                            "    import jinja2\n    return {'answer': input['q'], 'jinja2': jinja2.__name__}\n")
    result = project.run("run")
    assert result.code == 0 and "100.0%" in result.out, result


# -- what the store holds: damage is detected ------------------------------------------------------


def stored_run(project) -> str:
    project.cases(GOOD)
    result = project.run("run")
    assert result.code == 0, result
    return project.runs()[0]


def checkpoint(project) -> None:
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


DAMAGED = "fix: run `oloproof store check` to see everything damaged"


@pytest.mark.slow
def test_a_lost_case_record_is_detected_by_every_reader(project):
    run_id = stored_run(project)
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        db.execute("DELETE FROM run_cases WHERE idx > 0")
    for args in (("inspect", run_id), ("inspect", run_id, "--failures"), ("export", run_id)):
        one_line(project.run(*args), f"run {run_id} is damaged: 1 of its 12 case records do not match")
    assert not (project.root / ".oloproof" / "bundles" / run_id / "cases.jsonl").exists()
    project.write("compare.yaml", "version: 1\nrules: []\n")
    one_line(project.run("compare", run_id, run_id, "--policy", "compare.yaml"), f"run {run_id} is damaged")
    check = project.run("store", "check")
    assert check.code == 2, check
    assert f"Damaged: run {run_id}: 1 case records, 12 stored" in check.out


@pytest.mark.slow
def test_flipped_bytes_in_a_case_record_are_detected(project):
    run_id = stored_run(project)
    checkpoint(project)
    db = project.root / ".oloproof" / "store.db"
    data = db.read_bytes()
    at = data.index(b'"expected":{"answer":"answer 7"}') + len(b'"expected":{')  # in the case record, not a cache value
    db.write_bytes(data[:at + 1] + b"X" + data[at + 2:])
    one_line(project.run("inspect", run_id), f"run {run_id} is damaged: its case records do not match")
    assert project.run("store", "check").code == 2


@pytest.mark.slow
def test_an_edited_cached_judgment_is_a_miss_and_a_warning(project):
    project.cache_judgments()
    project.cases([case(i, ok=i > 1) for i in range(12)])
    first = project.run("run")
    assert "10 / 12 observed" in first.out
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        db.execute("UPDATE cache SET value = replace(value, '\"fail\"', '\"pass\"') WHERE ns = 'judgment'")
    check = project.run("store", "check")
    assert check.code == 2 and check.out.count("Damaged: cache judgment") == 2, check
    again = project.run("run")
    assert again.code == 0, again
    assert "10 / 12 observed" in again.out  # recomputed, not read from the edited rows
    assert "judgment 10 hit/2 miss" in again.out
    assert again.err.strip() == ("warning: cached values failed their checksum and were recomputed (2 judgment); "
                                 "run `oloproof store check`")
    assert project.run("store", "check").code == 0  # the recomputed values replaced them


# -- files written: modes, symbolic links, terminal escapes -------------------------------------------


@pytest.mark.slow
def test_store_and_bundle_files_follow_the_umask(project):
    run_id = stored_run(project)
    old = os.umask(0o027)
    try:
        shutil.rmtree(project.root / ".oloproof")
        run_id = stored_run(project)
        assert project.run("export", run_id).code == 0
    finally:
        os.umask(old)
    root = project.root / ".oloproof"
    files = [root / "store.db", root / "bundles" / run_id / "cases.jsonl", root / "bundles" / run_id / "run.json"]
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o640)}
    assert oct((root / "bundles" / run_id).stat().st_mode & 0o777) == oct(0o750)


@pytest.mark.slow
def test_export_refuses_a_symlink_out_of_the_project(project, tmp_path_factory):
    run_id = stored_run(project)
    outside = tmp_path_factory.mktemp("outside")
    (project.root / ".oloproof" / "bundles").mkdir()
    os.symlink(outside, project.root / ".oloproof" / "bundles" / run_id)
    one_line(project.run("export", run_id), f".oloproof/bundles/{run_id} is a symbolic link")
    assert list(outside.iterdir()) == []


@pytest.mark.slow
def test_inspect_escapes_terminal_control_characters(project):
    project.write("app.py", "from oloproof import system\n\n@system(name='e', version='1')\ndef run(input):\n"
                            "    raise RuntimeError('\\x1b[2J\\x1b]0;pwned\\x07 gone')\n")
    project.cases(GOOD[:1])
    assert project.run("run").code == 0
    shown = project.run("inspect", "latest", "--case", "c000")
    assert "\x1b" not in shown.out and "\x07" not in shown.out
    assert "missing: error: RuntimeError: \\x1b[2J\\x1b]0;pwned\\x07 gone" in shown.out
    failures = project.run("inspect", "latest", "--failures")
    assert "\x1b" not in failures.out

"""A newcomer's first day at the command line: naming runs (`previous`, `latest~N`), comparing
under the project's own policy, the runs list, quiet and slice-free reports, `init --here`,
hints that can be pasted as they are, tables at 80 columns, and where a system's own code raised.
Every test goes through the real command line."""

from __future__ import annotations

import re

import pytest

from conftest import case, olo

RUN = re.compile(r"run_[0-9A-Z]{26}")

COMPARE = """
version: 1
confidence_level: 0.95
block_on: [FAIL]
rules:
  - {id: not-worse, metric: answer_correct, kind: non-inferiority, margin: 0.05}
"""


def run_ids(project, n: int) -> list[str]:
    """``n`` runs of the project, oldest first."""
    project.cases([case(i, ok=i % 3 > 0, **({"boom": True} if i == 5 else {})) for i in range(6)])
    ids = []
    for _ in range(n):
        result = project.run("run")
        assert result.code == 0, result
        ids.append(RUN.search(result.out).group())
    return ids


@pytest.mark.slow
def test_previous_and_latest_tilde_name_the_runs_before_the_newest(project):
    first, second, third = run_ids(project, 3)
    assert project.run("inspect", "latest").out.startswith(f"Run {third} ")
    assert project.run("inspect", "previous").out.startswith(f"Run {second} ")
    assert project.run("inspect", "latest~1").out.startswith(f"Run {second} ")
    assert project.run("inspect", "latest~2").out.startswith(f"Run {first} ")
    assert project.run("inspect", "latest~0").out.startswith(f"Run {third} ")
    beyond = project.run("inspect", "latest~3")
    assert beyond.code == 2 and beyond.err == (
        "error: latest~3 names no run: the store has 3 runs (a diagnosis's child runs aside); "
        "fix: list them with `oloproof runs`; latest~2 is the oldest\n"), beyond
    bad = project.run("export", "latest~one")
    assert bad.code == 2 and bad.err.startswith("error: 'latest~one' names no run: ~ takes a number"), bad
    # the compare of the last two runs, under the project's compare.yaml with no --policy
    project.write("compare.yaml", COMPARE)
    compared = project.run("compare", "latest", "previous")
    assert compared.code == 0, compared
    assert f"{third}" in compared.out and f"{second}" in compared.out
    assert "not-worse" in compared.out


@pytest.mark.slow
def test_compare_without_policy_or_compare_yaml_says_which_file_it_looked_for(project):
    run_ids(project, 2)
    result = project.run("compare", "latest", "previous")
    assert result.code == 2 and result.err == (
        "error: --policy: no --policy given and no compare.yaml in the project's directory, so there is no "
        "comparison policy to decide; fix: write compare.yaml beside oloproof.yaml (docs/compare.md), or pass "
        "--policy FILE\n"), result


@pytest.mark.slow
def test_runs_lists_newest_first_with_the_gate_and_child_runs_only_with_all(tmp_path):
    root = tmp_path / "demo"
    assert olo("init", "--example", "support_rag", str(root), cwd=tmp_path).code == 0
    first = RUN.search(olo("run", cwd=root).out).group()
    diagnosed = olo("diagnose", first, "--intervention", "gold-context", "--criterion", "answer_correct", cwd=root)
    children = RUN.findall(diagnosed.out.split("Child runs:")[1].splitlines()[0])
    assert len(children) == 2, diagnosed
    second = RUN.search(olo("run", "--config", "oloproof.yaml", cwd=root).out).group()
    listed = olo("runs", cwd=root)
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in listed.out.splitlines()
            if line.startswith("│")]
    assert rows[0] == ["run", "created", "gate", "state", "system", "config", "cases"], rows
    assert [r[0] for r in rows[1:]] == [second, first]  # newest first, child runs left out
    assert rows[1][2] == rows[2][2] == "BLOCK"
    assert listed.out.splitlines()[-1] == "2 diagnosis child runs not listed; `oloproof runs --all` lists them."
    every = [[c.strip() for c in line.strip("│").split("│")] for line in olo("runs", "--all", cwd=root).out.splitlines()
             if line.startswith("│")]
    assert every[0][-1] == "diagnosis child" and [r[0] for r in every[1:]][::3] == [second, first]
    assert sorted(r[0] for r in every[2:4]) == sorted(children)
    assert {r[2] for r in every[2:4]} == {"—"} and all(r[-1].endswith(f"of {first}") for r in every[2:4])


def test_a_table_at_80_columns_never_breaks_a_run_id_or_a_verdict():
    from oloproof_core.outputs.terminal import fit_tables
    from oloproof_core.statistics.display import table

    ids = ["run_01M8Y1A9D1Z40B7XBNZXK5A214", "run_01M8Y18V5SS5TB3P20Y1BXKAAA"]
    gate = table(["rule", "metric", "verdict", "reason"],
                 [["answer-floor", "answer_correct", "INSUFFICIENT_EVIDENCE", "interval_overlaps_threshold"],
                  ["citations-valid", "citations_valid", "PASS", "observed_failures_within_limit"]])
    fitted = fit_tables(gate, 80)
    assert max(len(line) for line in fitted) <= 80 and fitted != gate
    assert sum("INSUFFICIENT_EVIDENCE" in line for line in fitted) == 1
    assert any(line.rstrip(" │").endswith("interval_") for line in fitted)  # broken after _, not inside
    runs = table(["run", "created", "gate", "state", "system", "config", "cases"],
                 [[i, "2026-12-03T13:25:48Z", "BLOCK", "DECIDED/COMPLETE", "support-rag slice-b-example+0347a9b79d84",
                   "cddc0d27", "13"] for i in ids])
    fitted = fit_tables(runs, 80)
    assert max(len(line) for line in fitted) <= 80
    assert all(any(i in line for line in fitted) for i in ids)  # each id whole on one line
    assert "run      run_01M8Y1A9D1Z40B7XBNZXK5A214" in fitted  # too narrow: one field a line


@pytest.mark.slow
def test_quiet_and_no_slices_leave_out_what_they_say(project):
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "slices: [metadata.topic]\n")
    project.cases([case(i) for i in range(4)])
    full = project.run("run")
    assert "Slices (exploratory" in full.out
    no_slices = project.run("run", "--no-slices")
    assert "Slices (exploratory" not in no_slices.out and "metadata.topic=even" not in no_slices.out
    assert re.search(r"^Slices: \d+ rows not shown \(--no-slices\); `oloproof view` shows them on the run.s page$",
                     no_slices.out, flags=re.M), no_slices.out
    quiet = project.run("run", "--quiet")
    assert quiet.code == 0
    assert quiet.out.splitlines()[1:] == ["Gate: none (no policy; exit 0)"], quiet.out


@pytest.mark.slow
def test_init_here_adds_a_project_beside_the_files_already_there(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    refused = olo("init", "--example", "basic", str(tmp_path), cwd=tmp_path.parent)
    assert refused.code == 2 and refused.err.endswith(
        f"fix: choose a new directory, or add the project beside your files: cd {tmp_path} && "
        "oloproof init --example basic --here\n"), refused
    added = olo("init", "--example", "basic", "--here", cwd=tmp_path)
    assert added.code == 0 and added.out == "Added to the current directory from the basic example. Next: oloproof run\n"
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine\n" and (tmp_path / "oloproof.yaml").is_file()
    assert olo("run", cwd=tmp_path).code in (0, 1, 3)
    again = olo("init", "--example", "basic", "--here", cwd=tmp_path)
    assert again.code == 2 and "oloproof.yaml" in again.err and "would replace" in again.err, again


@pytest.mark.slow
def test_the_http_template_s_hint_is_commands_that_paste_as_they_are(tmp_path):
    made = olo("init", "--template", "http", "svc", cwd=tmp_path)
    assert made.code == 0, made
    commands = [line.strip() for line in made.out.splitlines()[1:]]
    assert commands == ["cd svc && python server.py", "cd svc && oloproof run"]
    assert not any("&" in c.replace("&&", "") for c in commands)  # nothing is sent to the background


APP = '''
from oloproof import system

import planets


@system(name="planets", version="1")
def run(input):
    return {"answer": planets.describe(input["q"])}
'''
PLANETS = '''
import json

MOONS = {"earth": "one moon"}


def describe(name):
    facts = json.loads(json.dumps(MOONS))
    return facts[name]
'''


@pytest.mark.slow
def test_the_system_s_own_traceback_is_stored_and_shown_by_inspect_case_and_debug(project):
    project.write("app.py", APP)
    project.write("planets.py", PLANETS)
    project.cases([{"id": "ok", "input": {"q": "earth"}, "expected": {"answer": "moon"}},
                   {"id": "moons", "input": {"q": "moons"}, "expected": {"answer": "moon"}}])
    ran = project.run("--debug", "run")
    assert ran.code == 0, ran
    frames = ['    app.py:8 in run: return {"answer": planets.describe(input["q"])}',
              "    planets.py:8 in describe: return facts[name]"]
    assert ran.err.splitlines() == ["Case moons: error: KeyError: 'moons'",
                                    "  Traceback (the project's frames, most recent call last):", *frames], ran.err
    shown = project.run("inspect", "latest", "--case", "moons").out.splitlines()
    at = shown.index("  missing: error: KeyError: 'moons'")
    assert shown[at + 1:at + 4] == ["  Traceback (the project's frames, most recent call last):", *frames], shown
    assert "json" not in "".join(shown[at:at + 4])  # the standard library's frames are not the project's
    assert "Traceback" not in project.run("run").err  # without --debug, the run prints none


@pytest.mark.slow
def test_at_80_columns_the_run_s_verdicts_and_the_runs_ids_stay_whole_and_coloured(tmp_path):
    from test_terminal import on_terminal

    root = tmp_path / "demo"
    assert olo("init", "--example", "support_rag", str(root), cwd=tmp_path).code == 0
    code, out, _ = on_terminal("run", cwd=root, columns=80)
    assert code == 3
    assert max(len(re.sub(r"\x1b\[[0-9;]*m", "", line)) for line in out.splitlines()) <= 80, out
    assert out.count("\x1b[33mINSUFFICIENT_EVIDENCE\x1b[0m") == 2 and "\x1b[32mPASS\x1b[0m" in out, out
    run_id = RUN.search(out).group()
    code, listed, _ = on_terminal("runs", cwd=root, columns=80, env={"NO_COLOR": "1"})
    assert code == 0 and f"run      {run_id}" in listed.splitlines() and "gate     BLOCK" in listed.splitlines(), listed

"""What a CI reads: --junit, --json and --markdown of `run` and `compare`, validated against the
JUnit schema Jenkins and GitLab read (tests/data/junit.xsd) and the shipped JSON Schema; and
--format json of `runs`, `inspect` and `compare`."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import xmlschema

from conftest import case

XSD = xmlschema.XMLSchema(Path(__file__).resolve().parents[1] / "data" / "junit.xsd")
OUTPUTS = ("--junit", "out/junit.xml", "--junit-cases", "--json", "out/results.json", "--markdown", "out/summary.md")
POLICY = """
policy:
  version: 1
  block_on: {block_on}
  rules:
    - {{id: floor, metric: answer_correct, min: {minimum}}}
    - {{id: none-failed, metric: answer_correct, kind: observed_count, max_failures: 10}}
"""


def schema() -> dict:
    from oloproof_core.outputs import schema as shipped

    return shipped()


def check(root: Path, code: int) -> tuple[ET.Element, dict, str]:
    """The three files, each valid against its schema; the JSON's exit code is the command's."""
    XSD.validate(str(root / "out" / "junit.xml"))
    document = json.loads((root / "out" / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)
    assert document["exit_code"] == code == document["gate"]["exit_code"]
    return (ET.parse(root / "out" / "junit.xml").getroot(), document,
            (root / "out" / "summary.md").read_text(encoding="utf-8"))


def states(junit: ET.Element, suite: str) -> dict[str, str]:
    """testcase name -> passed, failure, error or skipped."""
    out = {}
    for testcase in junit.find(f"testsuite[@name='{suite}']").findall("testcase"):
        kind = next((child.tag for child in testcase if child.tag in ("failure", "error", "skipped")), "passed")
        out[testcase.get("name")] = kind
    return out


def test_the_shipped_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(schema())


@pytest.mark.slow
@pytest.mark.parametrize(("minimum", "block_on", "code", "gate", "floor"), [
    ("0.40", "[FAIL, INSUFFICIENT_EVIDENCE]", 0, "PASS", "passed"),
    ("0.95", "[FAIL, INSUFFICIENT_EVIDENCE]", 1, "BLOCK", "failure"),
    ("0.70", "[FAIL, INSUFFICIENT_EVIDENCE]", 3, "BLOCK", "failure"),
    ("0.70", "[FAIL]", 0, "PASS", "skipped"),  # an insufficient-evidence rule that does not block
])
def test_run_writes_valid_junit_json_and_markdown(project, minimum, block_on, code, gate, floor):
    project.cases([case(i, ok=i < 11) for i in range(15)])  # 11/15: [44.8%, 92.3%]
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text()
                  + POLICY.format(minimum=minimum, block_on=block_on))
    result = project.run("run", *OUTPUTS)
    assert result.code == code, result
    junit, document, markdown = check(project.root, code)
    assert states(junit, "oloproof.gate") == {"floor (answer_correct)": floor, "none-failed (answer_correct)": "passed"}
    cases = states(junit, "oloproof.cases")
    assert len(cases) == 15 and cases["c000 · answer_correct"] == "passed" and cases["c011 · answer_correct"] == "failure"
    floor_case = junit.find("testsuite/testcase[@name='floor (answer_correct)']")
    if floor != "passed":  # the message carries the verdict, the metric, its interval and counts
        message = floor_case[0].get("message")
        assert "answer_correct 73.3% [44.8%, 92.3%] · 11 / 15 observed · 0 missing · 0 excluded" in message
        assert f"min {100 * float(minimum):.1f}%" in message
    assert document["gate"]["verdict"] == gate and document["run"]["id"] == result.out.split()[1]
    metric = document["metrics"][0]
    assert (metric["name"], metric["successes"], metric["observed"]) == ("answer_correct", 11, 15)
    assert metric["low"] == pytest.approx(0.448, abs=0.001) and metric["high"] == pytest.approx(0.922, abs=0.001)
    assert f"**Gate: {gate}** (exit {code})" in markdown
    assert "| answer_correct | 73.3% | [44.8%, 92.3%] | 11 / 15 observed · 0 missing · 0 excluded |" in markdown
    if code != 0 or floor == "skipped":
        return
    plain = project.run("run")  # the terminal output does not change with the flags
    assert plain.out.splitlines()[1:] == [line.replace("execution 0 hit/15 miss", "execution 15 hit/0 miss")
                                          for line in result.out.splitlines()[1:]]  # contains: made again


def test_an_interrupted_run_reports_its_rules_undecided(project):
    project.write("app.py", """
        from oloproof import system

        @system(name="stops", version="1")
        def run(input):
            if input["q"] == "answer 5":
                raise KeyboardInterrupt  # Ctrl-C while the sixth case runs
            return {"answer": input["q"]}
    """)
    project.cases([case(i) for i in range(10)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "concurrency: 1\n"
                  + POLICY.format(minimum="0.5", block_on="[FAIL]"))
    result = project.run("run", *OUTPUTS)
    assert result.code == 130, result
    junit, document, markdown = check(project.root, 130)
    assert set(states(junit, "oloproof.gate").values()) == {"error"}
    assert document["run"]["state"] == "UNDECIDED/INTERRUPTED" and document["gate"]["verdict"] == "UNDECIDED"
    assert [d["verdict"] for d in document["decisions"]] == [None, None]
    assert document["missing"] == {"cases": 5, "reasons": [{"reason": "interrupted", "cases": 5}]}
    assert states(junit, "oloproof.cases")["c007 · answer_correct"] == "error"
    assert "**Gate: UNDECIDED** (the run was interrupted; exit 130)" in markdown


@pytest.mark.slow
def test_a_run_without_a_policy_and_the_step_summary(project, tmp_path):
    project.cases([case(i) for i in range(3)])
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    for _ in range(2):
        result = project.run("run", "--json", "out/results.json", env={"GITHUB_STEP_SUMMARY": str(summary)})
        assert result.code == 0
    document = json.loads((project.root / "out" / "results.json").read_text())
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)
    assert document["gate"] == {"verdict": None, "exit_code": 0, "block_on": [], "policy": False}
    assert document["decisions"] == [] and document["caches"]["execution"] == {"hits": 3, "misses": 0}
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n") and text.count("**Gate: none** (no policy; exit 0)") == 2


def test_junit_cases_needs_junit(project):
    project.cases([case(0)])
    result = project.run("run", "--junit-cases")
    assert result.code == 2 and "--junit-cases adds to the --junit file" in result.err



@pytest.mark.parametrize(("argv", "says"), [
    (["--report", "nosuch=out.txt"], "unknown reporter 'nosuch'"),
    (["--report", "junit"], "expected NAME=TARGET"),
])
def test_a_report_asked_for_wrongly_stops_the_run_before_it_starts(project, argv, says):
    project.cases([case(0)])
    result = project.run("run", *argv)
    assert result.code == 2 and says in result.err, result
    assert result.out == "" and not (project.root / ".oloproof").exists()  # nothing ran, nothing stored


def test_report_names_the_builtin_reporters_as_the_flags_do(project):
    project.cases([case(0), case(1, ok=False)])
    result = project.run("run", "--report", "json=by-name.json", "--json", "by-flag.json")
    assert result.code == 0, result
    by_name, by_flag = (json.loads((project.root / f).read_text()) for f in ("by-name.json", "by-flag.json"))
    assert by_name == by_flag and by_name["run"]["id"] == result.out.split()[1]

COMPARE = """
version: 1
block_on: [FAIL, INSUFFICIENT_EVIDENCE]
rules:
  - {id: not-worse, metric: answer_correct, kind: non-inferiority, margin: 5.0}
  - {id: floor, metric: answer_correct, kind: floor, min: 0.5}
"""


@pytest.mark.slow
def test_compare_writes_valid_outputs_with_the_cases_that_changed_verdict(project):
    project.cases([case(i) for i in range(12)])
    baseline = project.run("run").out.split()[1]
    project.cases([case(i, ok=i not in (3, 4)) for i in range(12)])
    candidate = project.run("run").out.split()[1]
    project.write("compare.yaml", COMPARE)
    plain = project.run("compare", candidate, baseline, "--policy", "compare.yaml")
    result = project.run("compare", candidate, baseline, "--policy", "compare.yaml", *OUTPUTS)
    assert result.code == plain.code == 3, result
    assert result.out == plain.out  # the flags add files, not lines
    junit, document, markdown = check(project.root, 3)
    assert states(junit, "oloproof.compare") == {"not-worse (answer_correct)": "failure", "floor (answer_correct)": "passed"}
    cases = states(junit, "oloproof.cases")  # --junit-cases: the candidate's cases
    assert len(cases) == 12 and cases["c003 · answer_correct"] == "failure" and cases["c002 · answer_correct"] == "passed"
    message = junit.find("testsuite/testcase[@name='not-worse (answer_correct)']/failure").get("message")
    assert "non-inferiority, margin 5.0 points" in message and "answer_correct -16.7 points [" in message
    assert "12 paired · 0 missing · 0 excluded" in message
    assert document["id"] == result.out.split()[1] and document["candidate"]["id"] == candidate
    assert document["changed_cases"] == [
        {"case": c, "criterion": "answer_correct", "baseline": "pass", "candidate": "fail"} for c in ("c003", "c004")]
    assert "**Cases that changed verdict: 2**" in markdown and "| c003 | answer_correct | pass | fail |" in markdown
    as_json = project.run("compare", candidate, baseline, "--policy", "compare.yaml", "--format", "json")
    assert as_json.code == 3 and json.loads(as_json.out) == document


@pytest.mark.slow
def test_runs_and_inspect_print_json_for_scripts(project):
    project.cases([case(i, ok=i != 1) for i in range(3)])
    assert json.loads(project.run("runs", "--format", "json").out) == []
    run_id = project.run("run").out.split()[1]
    listed = json.loads(project.run("runs", "--format", "json").out)
    assert [(r["id"], r["state"], r["cases"]) for r in listed] == [(run_id, "UNGATED/COMPLETE", 3)]
    shown = json.loads(project.run("inspect", run_id, "--format", "json").out)
    jsonschema.validate(shown, schema(), cls=jsonschema.Draft202012Validator)
    assert shown["run"]["id"] == run_id
    failures = json.loads(project.run("inspect", run_id, "--failures", "--format", "json").out)
    assert [r["id"] for r in failures["failures"]] == ["c001"]
    one = json.loads(project.run("inspect", run_id, "--case", "c002", "--format", "json").out)
    assert one["judgments"]["answer_correct"]["status"] == "pass"


@pytest.mark.slow
@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_exported_bundle_files_all_get_the_umask_mode(project, umask):
    project.cases([case(i) for i in range(2)])
    run_id = project.run("run").out.split()[1]
    previous = os.umask(umask)  # the child process inherits it
    try:
        assert project.run("export", run_id).code == 0
        assert project.run("export", run_id).code == 0  # a second export rewrites the files the same way
    finally:
        os.umask(previous)
    folder = project.root / ".oloproof" / "bundles" / run_id
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert modes == {"cases.jsonl": 0o666 & ~umask, "run.json": 0o666 & ~umask}

"""What a newcomer meets in the first hour: why a case failed, exclusions named, commands run
outside a project, policy files named in their errors, `latest`, and every --help readable."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from conftest import case, olo

from oloproof_core.cli import cli

POLICY = "version: 1\nrules:\n  - {id: floor, metric: answer_correct, min: 0.5}\n"


# --- failures explained ---------------------------------------------------------------------------

def test_exclusions_are_named_one_line_a_criterion(project):
    typo = {**case(1), "expected": {"anwser": "answer 1"}}  # a misspelt key inside expected
    bare = {**case(2), "expected": {}}
    project.cases([case(0), typo, bare])
    result = project.run("run")
    assert result.code == 0, result
    assert "│ answer_correct │ 100.0%" in result.out and "1 / 1 observed · 0 missing · 2 excluded" in result.out
    assert "Excluded: answer_correct leaves out 2 of 3 cases that ran: no_expected_value (2)" in result.out.splitlines()


def test_a_run_without_exclusions_prints_no_excluded_line(project):
    project.cases([case(0), case(1, ok=False)])
    result = project.run("run")
    assert result.code == 0 and "Excluded:" not in result.out and "Failed: every" not in result.out


@pytest.mark.slow
@pytest.mark.parametrize("evaluator, reason", [("contains", "field_absent"), ("exact", "field_absent")])
def test_a_bare_string_where_a_field_is_read_says_so_in_one_line(project, evaluator, reason):
    project.write("app.py", """
        from oloproof import system

        @system(name="bare", version="1")
        def run(input):
            return input["q"]
    """)
    project.write("oloproof.yaml", f"""
        system: {{callable: app:run}}
        evaluators:
          - {{type: {evaluator}, criterion: answer_correct, field: answer}}
    """)
    project.cases([case(i) for i in range(3)])
    result = project.run("run")
    assert result.code == 0, result
    assert (f"Failed: every answer_correct judgment (3 of 3) failed with {reason}: no output has the field 'answer'; "
            "fix: return an object with 'answer' from the system, or set the evaluator's field: to the key that "
            "holds the answer") in result.out.splitlines()
    failures = project.run("inspect", "latest", "--failures")
    assert "  answer_correct: failed, field_absent (the output has no field 'answer')" in failures.out.splitlines()


def test_one_failure_is_not_called_structural(project):
    project.cases([case(0, ok=False)])
    assert "Failed: every" not in project.run("run").out  # one judgment says nothing about the suite


@pytest.mark.slow
@pytest.mark.parametrize("evaluator, reason", [("contains", "expected_text_not_found"), ("exact", "not_equal")])
def test_inspect_failures_shows_the_expected_value_and_each_reason(project, evaluator, reason):
    project.write("oloproof.yaml", f"""
        system: {{callable: app:run}}
        evaluators:
          - {{type: {evaluator}, criterion: answer_correct, field: answer}}
    """)
    project.cases([case(0), case(1, ok=False), {**case(2), "input": {"q": "x", "boom": True}}])
    project.run("run")
    out = project.run("inspect", "latest", "--failures").out.splitlines()
    assert out[0] == "2 of 3 cases failed, errored or did not finish: 1 failed, 1 errored"
    why = out[out.index("Why: each case's expected value, and the reason each criterion gives"):]
    assert why[1:] == [
        "", "c001", '  expected: {"answer": "answer 1"}',
        f'  answer_correct: failed, {reason} (looked for ["answer 1"] in output.answer)',
        "", "c002", '  expected: {"answer": "answer 2"}',
        "  answer_correct: missing, error: RuntimeError: boom",
    ]
    data = json.loads(project.run("inspect", "latest", "--failures", "--format", "json").out)
    failed = {r["id"]: r for r in data["failures"]}
    assert failed["c001"]["case"]["expected"] == {"answer": "answer 1"}
    assert failed["c001"]["judgments"]["answer_correct"] == {
        "status": "fail", "value": 0.0, "reason": reason, "detail": {"field": "answer", "expected": ["answer 1"]}}


@pytest.mark.slow
def test_a_suite_without_evaluators_is_a_config_error(project):
    project.cases([case(0)])
    project.write("oloproof.yaml", "system: {callable: app:run}\nevaluators: []\n")
    result = project.run("run")
    assert result.code == 2
    assert result.err.startswith("error: oloproof.yaml:2:1: $.evaluators: the suite has no evaluators, so a run "
                                 "would measure nothing; fix: add at least one under `evaluators:`")
    project.write("oloproof.yaml", "system: {callable: app:run}\n")
    assert "oloproof.yaml:1:1: $: the suite has no evaluators" in project.run("run").err
    assert project.runs() == []


# --- outside a project ------------------------------------------------------------------------------

READ_ONLY = [["runs"], ["inspect", "latest"], ["inspect", "latest", "--failures"], ["export", "latest"],
             ["compare", "latest", "latest", "--policy", "compare.yaml"],
             ["diagnose", "latest", "--intervention", "top-k", "--top-k", "4", "--criterion", "a"],
             ["view", "--port", "0"], ["cache"], ["cache", "clear", "--all"]]


@pytest.mark.slow
@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a[:2]))
def test_read_only_commands_outside_a_project_say_so_and_create_nothing(tmp_path, args):
    (tmp_path / "compare.yaml").write_text(POLICY.replace("min: 0.5", "kind: floor, min: 0.5"), encoding="utf-8")
    result = olo(*args, cwd=tmp_path, env={"OLOPROOF_STORE": ""})
    assert result.code == 2, result
    assert result.err == ("error: no oloproof.yaml here, so there is no project to read; fix: cd to the project's "
                          "directory, pass --config FILE, or create a project with "
                          "`oloproof init --template callable DIR`\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.yaml"]  # no .oloproof/


@pytest.mark.slow
def test_a_missing_config_file_is_named(tmp_path):
    result = olo("runs", "--config", "nope.yaml", cwd=tmp_path)
    assert result.code == 2
    assert result.err.startswith("error: --config: no config file nope.yaml; fix: ")
    assert list(tmp_path.iterdir()) == []


# --- policy files ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_missing_policy_file_names_the_policy_key(project):
    project.cases([case(0)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "policy: policy.yaml\n")
    result = project.run("run")
    assert result.code == 2
    assert result.err == ("error: policy.yaml: no such file policy.yaml; fix: create it, or fix the `policy:` path "
                          "in oloproof.yaml\n")


@pytest.mark.slow
def test_a_missing_compare_policy_names_the_option(project):
    project.cases([case(0)])
    project.run("run")
    result = project.run("compare", "latest", "latest", "--policy", "nope.yaml")
    assert result.code == 2
    assert result.err == "error: nope.yaml: no such file nope.yaml; fix: create it, or pass another file with --policy\n"


def test_a_policy_offers_only_its_documented_keys(project):
    project.cases([case(0)])
    project.write("policy.yaml", POLICY + "bogus: 1\n")
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "policy: policy.yaml\n")
    err = project.run("run").err
    assert err == ("error: policy.yaml:4:1: $.bogus: unknown key 'bogus'; fix: remove it; a policy accepts: version, "
                   "confidence_level, block_on, rules, judge_validation, sequential, labels\n")
    project.write("policy.yaml", POLICY + "where: {floor: x}\n")  # filled in by the loader, never read from the file
    result = project.run("run")
    assert result.code == 2 and result.err.startswith("error: policy.yaml:4:1: $.where: unknown key 'where'; fix: ")


# --- latest ------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_judge_validate_reads_latest_the_newest_run_of_the_project(project):
    """The outputs come from the newest run, whichever config made it, as `latest` means everywhere."""
    project.cases([case(0), case(1, ok=False)])
    project.write("other.yaml", (project.root / "oloproof.yaml").read_text())
    project.write("labels.jsonl", '{"id": "c000", "label": true}\n{"id": "c001", "label": false}\n')
    first = project.run("run").out.split()[1]
    newest = project.run("run", "--config", "other.yaml").out.split()[1]
    assert first != newest
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    assert f"Outputs: run {newest} (2 cases)" in result.out, result


# --- help --------------------------------------------------------------------------------------------

def _commands(command: click.Command, path: list[str]):
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, [*path, name])


def test_no_help_shows_rest_markup():
    for path in _commands(cli, []):
        shown = CliRunner().invoke(cli, [*path, "--help"], terminal_width=100)
        assert shown.exit_code == 0, path
        assert "``" not in shown.output and ":param" not in shown.output, (path, shown.output)

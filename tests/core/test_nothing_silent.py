"""Nothing fails or passes silently: lists of acceptable answers, expected values that cannot be
compared, runs in which nothing was measured, missing judgments, and a validation with nothing
to compare. Every case goes through the command line."""

from __future__ import annotations

import json

import pytest

from conftest import Project

APP = '''
from oloproof import Passage, Retrieval, current_case, system


@system(name="echo", version="1", records=("retrieval/v1",))
def run(input):
    if input.get("boom"):
        raise RuntimeError("boom")
    if input.get("docs") is not None:
        current_case().retrieval(Retrieval(query=input["q"], depth=3, candidates=tuple(
            Passage(doc_id=d) for d in input["docs"])))
    return {"answer": input["q"]}
'''

CONFIG = """
system:
  name: echo
  version: "1"
  callable: app:run
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: has, field: answer}
  - {type: exact, criterion: same, field: answer, ignore_case: true}
"""
POLICY = """
policy:
  version: 1
  rules:
    - {id: floor, metric: has, min: 0.5}
"""


def make(root, cases: list[dict], config: str = CONFIG) -> Project:
    project = Project(root)
    project.write("app.py", APP)
    project.write("oloproof.yaml", config)
    project.cases(cases)
    return project


def rows(text: str) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("│").split("│")]
                                              for line in text.splitlines() if line.startswith("│"))}


def test_a_list_of_acceptable_answers_passes_on_any_of_them(tmp_path):
    answers = ["Underscores are ignored", "digit grouping"]
    project = make(tmp_path, [
        {"id": "first", "input": {"q": "underscores are ignored in 1_000"}, "expected": {"answer": answers}},
        {"id": "second", "input": {"q": "Digit grouping"}, "expected": {"answer": answers}},
        {"id": "neither", "input": {"q": "commas"}, "expected": {"answer": answers}},
        {"id": "text", "input": {"q": "plain"}, "expected": {"answer": "plain"}},
    ])
    result = project.run("run")
    assert result.code == 0, result
    table = rows(result.out)
    assert table["has"][2] == "3 / 4 observed · 0 missing · 0 excluded"  # contains: first, second, text
    assert table["same"][2] == "2 / 4 observed · 0 missing · 0 excluded"  # exact: second, text


@pytest.mark.parametrize("value", [5, {"text": "x"}, [], ["a", 3], True])
def test_any_other_expected_value_is_a_located_error(tmp_path, value):
    project = make(tmp_path, [{"id": "ok", "input": {"q": "a"}, "expected": {"answer": "a"}},
                              {"id": "odd", "input": {"q": "a"}, "expected": {"answer": value}}])
    result = project.run("run")
    assert result.code == 2, result
    err = result.err.strip()
    assert err.startswith("error: cases.jsonl:2: $.expected.answer: contains compares text, and the expected "
                          f"value is {value!r}; fix: write a string, or a list of acceptable strings"), err
    assert project.runs() == []  # stopped before anything ran or was stored


def test_a_run_in_which_nothing_was_measured_is_not_a_decided_run(tmp_path):
    project = make(tmp_path, [{"id": f"c{i}", "input": {"q": "a", "boom": True}, "expected": {"answer": "a"}}
                              for i in range(3)], CONFIG + POLICY)
    result = project.run("run")
    assert result.code == 3, result
    lines = result.out.splitlines()
    assert lines[0].endswith(" [UNMEASURED/COMPLETE]")
    assert lines[1] == ("Nothing was measured: no case has an observed judgment (see Missing: below), so no rule "
                        "can pass")
    assert lines[2] == "Gate: BLOCK (exit 3)"
    assert "Missing: 3 of 3 cases produced no output: error: RuntimeError: boom (3)" in lines
    # with a policy that would not block on insufficient evidence, the gate still cannot pass
    lenient = CONFIG + POLICY.replace("  version: 1\n", "  version: 1\n  block_on: [FAIL]\n")
    project.write("oloproof.yaml", lenient)
    result = project.run("run")
    assert result.code == 3 and "Gate: BLOCK (exit 3)" in result.out, result


@pytest.mark.slow
def test_missing_judgments_get_their_own_line_and_inspect_separates_the_kinds(tmp_path):
    config = CONFIG + "  - {type: hit_rate, k: 2}\n"
    relevant = [{"doc_id": "d1"}]
    project = make(tmp_path, [
        {"id": "good", "input": {"q": "a", "docs": ["d1"]}, "expected": {"answer": "a", "relevant": relevant}},
        {"id": "wrong", "input": {"q": "b", "docs": ["d1"]}, "expected": {"answer": "a", "relevant": relevant}},
        {"id": "boom", "input": {"q": "a", "boom": True}, "expected": {"answer": "a", "relevant": relevant}},
        # answered, but recorded no retrieval: its hit_rate judgment is missing
        {"id": "silent", "input": {"q": "a"}, "expected": {"answer": "a", "relevant": relevant}},
    ], config)
    result = project.run("run")
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert "Missing: 1 of 4 cases produced no output: error: RuntimeError: boom (1)" in lines
    assert "Missing: hit_rate_at_2 has no judgment for 1 of 3 cases that ran: no_retrieval_recorded (1)" in lines
    run_id = lines[0].split()[1]
    failures = project.run("inspect", run_id, "--failures")
    assert failures.code == 0, failures
    assert [line for line in failures.out.splitlines() if line and not line.startswith(" ")] == [
        "3 of 4 cases failed, errored or did not finish: 1 failed, 1 errored, 1 not judged",
        "Failed: a judgment failed (1)", "wrong",
        "Errored or did not finish: no output to judge (1)", "boom",
        "Not judged: an output, but a judgment is missing (1)", "silent",
        "Why: each case's expected value, and the reason each criterion gives", "wrong", "boom", "silent",
    ]
    assert "  hit_rate_at_2: missing (no_retrieval_recorded)" in failures.out
    assert "  hit_rate_at_2: missing, no_retrieval_recorded" in failures.out.splitlines()


def test_a_validation_with_nothing_to_compare_stops_and_stores_nothing(tmp_path):
    project = make(tmp_path, [{"id": "c1", "input": {"q": "a", "boom": True}, "expected": {"answer": "a"}},
                              {"id": "c2", "input": {"q": "a", "boom": True}, "expected": {"answer": "a"}}])
    assert project.run("run").code == 0
    project.write("labels.jsonl", "".join(json.dumps({"id": i, "label": True}) + "\n" for i in ("c1", "c2")))
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "has")
    assert result.code == 2, result
    err = result.err.strip()
    assert err.startswith("error: none of the 2 labelled cases has a pass/fail judgment of 'has' to compare with "
                          "its label (error: RuntimeError: boom 2); fix: "), err
    import sqlite3

    with sqlite3.connect(tmp_path / ".oloproof" / "store.db") as db:
        kinds = [row[0] for row in db.execute("SELECT kind FROM objects")]
    assert "judge_validation" not in kinds

"""`oloproof headroom`: every case under each intervention beside its control, ranked by the lower
bound of the paired gain; and `relevance.evidence_min_grade` in diagnosis."""

from __future__ import annotations

import json
import re

import pytest

from conftest import Project, olo
from oloproof_core.statistics.display import points_cells
from oloproof_core.statistics.intervals import paired_difference
from test_diagnose import APP, CONFIG, child_records, fixture_case, no_causal_claim, run_id_of

INTERVENTIONS = ("--intervention", "gold-context", "--intervention", "top-k", "--top-k", "4",
                 "--intervention", "token-budget", "--token-budget", "120")
POLICY = """
version: 1
confidence_level: 0.95
block_on: [FAIL]
rules:
  - {id: answers, metric: answer_correct, kind: non-inferiority, margin: 5.0}
"""


@pytest.fixture(scope="module")
def support(tmp_path_factory):
    """support_rag after its first run, with one headroom of the three interventions (as JSON)."""
    root = tmp_path_factory.mktemp("support")
    assert olo("init", "--example", "support_rag", "p", cwd=root).code == 0
    project = Project(root / "p")
    run_id = run_id_of(project.run("run"))
    result = project.run("headroom", run_id, *INTERVENTIONS, "--criterion", "answer_correct", "--format", "json")
    assert result.code == 0, result
    text = project.run("inspect", json.loads(result.out)["id"])
    return project, run_id, json.loads(result.out), text


def test_support_rag_rows_match_a_hand_computation_and_compare(support):
    project, run_id, doc, _ = support
    assert doc["format"] == "oloproof.headroom" and doc["run"] == run_id and doc["cases"] == 13
    assert [r["label"] for r in doc["rows"]] == ["gold context", "top-k 4", "token-budget 120"]
    project.write("pair.yaml", POLICY)
    for row in doc["rows"]:
        applied, control = child_records(project, row["run"]), child_records(project, row["control_run"])
        assert sorted(applied) == sorted(control) and len(applied) == 13  # every case, not the failed ones
        ids = sorted(applied)
        x = [applied[i]["judgments"]["answer_correct"]["value"] for i in ids]
        y = [control[i]["judgments"]["answer_correct"]["value"] for i in ids]
        diff, low, high = paired_difference(x, y, 0.95)
        entry = row["paired"]
        assert (entry["difference"], entry["low"], entry["high"], entry["paired"]) == (diff, low, high, 13)
        value, bounds = points_cells(diff, low, high)
        assert entry["display"] == {"difference": value, "interval": bounds}
        assert row["fixed"] == [i for i in ids if applied[i]["judgments"]["answer_correct"]["status"] == "pass"
                                and control[i]["judgments"]["answer_correct"]["status"] == "fail"]
        assert row["broken"] == [i for i in ids if applied[i]["judgments"]["answer_correct"]["status"] == "fail"
                                 and control[i]["judgments"]["answer_correct"]["status"] == "pass"]
        assert row["cost"]["calls"] == row["cost"]["control_calls"] == 13
        # compare prints the same difference and interval for the same two child runs
        compared = project.run("compare", row["run"], row["control_run"], "--policy", "pair.yaml")
        assert f"answer_correct: {value} {bounds} · 13 paired · 0 missing · 0 excluded" in compared.out, compared
    gold, top_k, budget = doc["rows"]
    # the documented diagnoses: gold context recovers three, a wider top-k and a larger budget none
    assert gold["fixed"] == ["money_back", "refund_review", "security_review"] and gold["broken"] == []
    assert top_k["fixed"] == top_k["broken"] == [] and top_k["paired"]["difference"] == 0.0
    assert budget["fixed"] == budget["broken"] == [] and budget["paired"]["difference"] == 0.0
    assert budget["cost"]["context_tokens"] > budget["cost"]["control_context_tokens"]  # a larger budget costs


def test_support_rag_table_and_wording(support):
    project, run_id, doc, inspected = support
    out = inspected.out
    assert out.startswith(f"Headroom on answer_correct: 13 cases of {run_id}, each intervention beside its own "
                          "control (observed; no population claim)"), out
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    assert rows[0][:5] == ["rank", "intervention", "difference", "interval", "cases"]
    for cells, row in zip(rows[1:], doc["rows"]):
        assert cells[1:7] == [row["label"], row["paired"]["display"]["difference"],
                              row["paired"]["display"]["interval"], "13", str(len(row["fixed"])),
                              str(len(row["broken"]))]
    assert "Fixed under gold context: money_back, refund_review, security_review" in out
    assert "Interval above zero: none of 3; no gain is established on these cases" in out
    assert "Candidate experiment: none; no change measured gained on these cases" in out
    no_causal_claim(out)


def ranked_project(root) -> Project:
    """The diagnose fixture with twelve answers ranked at 3 (top_k 2) and two lost to the budget."""
    project = Project(root)
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG)
    cases = [fixture_case(f"ranked_{i:02d}", ["f1", "f2", "ans"]) for i in range(12)]
    cases += [fixture_case(f"budget_{i}", ["long", "ans"]) for i in range(2)]
    cases += [fixture_case("ok", ["ans", "f1"]), fixture_case("no_gold", ["ans", "f1"], gold=False)]
    project.cases(cases)
    return project


def test_the_right_intervention_ranks_first(tmp_path):
    project = ranked_project(tmp_path)
    run_id = run_id_of(project.run("run"))
    result = project.run("headroom", run_id, "--intervention", "token-budget", "--token-budget", "20",
                         "--intervention", "top-k", "--top-k", "3", "--intervention", "gold-context",
                         "--criterion", "answer_correct", "--format", "json")
    assert result.code == 0, result
    doc = json.loads(result.out)
    labels = [r["label"] for r in doc["rows"]]
    assert labels[0] == "gold context" or labels[:2] == ["top-k 3", "gold context"]
    shippable = [r for r in doc["rows"] if r["intervention"] != "gold-context"]
    assert [r["label"] for r in shippable] == ["top-k 3", "token-budget 20"]
    top_k, budget = shippable
    assert top_k["fixed"] == [f"ranked_{i:02d}" for i in range(12)] and top_k["paired"]["low"] > 0
    assert budget["fixed"] == ["budget_0", "budget_1"]
    gold = next(r for r in doc["rows"] if r["intervention"] == "gold-context")
    assert gold["paired"]["paired"] == 15 and gold["not_run"] == [{"id": "no_gold", "reason": "no_gold_context"}]
    assert top_k["paired"]["paired"] == 16  # a replay needs no gold passages
    text = project.run("inspect", doc["id"]).out
    assert "Interval above zero: " in text and "top-k 3" in text.split("Interval above zero: ")[1].splitlines()[0]
    assert "Candidate experiment: top-k 3, the highest lower bound of the gain among the changes measured." in text
    assert "Not run under gold context: 1 cases, no_gold_context" in text
    no_causal_claim(text)


def test_options_no_intervention_takes_stop_before_anything_runs(tmp_path):
    project = ranked_project(tmp_path)
    run_id = run_id_of(project.run("run"))
    before = project.runs()
    result = project.run("headroom", run_id, "--intervention", "gold-context", "--top-k", "3",
                         "--criterion", "answer_correct")
    assert result.code == 2 and "no chosen intervention takes --top-k" in result.err, result
    result = project.run("headroom", run_id, "--intervention", "top-k", "--top-k", "2", "--criterion", "answer_correct")
    assert result.code == 2 and "--top-k 2 is not above the run's top_k 2" in result.err, result
    assert project.runs() == before


def test_evidence_min_grade_counts_only_answer_passages(tmp_path):
    """A related passage (grade 1) in the context hides a dropped answer passage (grade 2) unless
    relevance.evidence_min_grade is 2; the summary and inspect name the grade."""
    project = Project(tmp_path)
    project.write("app.py", APP)
    case = fixture_case("hidden", ["f1", "long", "ans"], first_only=True)
    case["expected"]["relevant"] = [{"doc_id": "ans", "grade": 2}, {"doc_id": "f1", "grade": 1}]
    project.cases([case])
    project.write("oloproof.yaml", CONFIG)
    run_id = run_id_of(project.run("run"))
    plain = project.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct")
    assert "UNRESOLVED: 1 of 1, recovered, though relevant evidence was already in the context" in plain.out, plain
    assert "Evidence:" not in plain.out and "grade" not in plain.out

    project.write("oloproof.yaml", CONFIG + "relevance:\n  evidence_min_grade: 2\n")
    run_id = run_id_of(project.run("run"))
    graded = project.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct")
    assert ("Evidence: only relevant units of grade 2 or more count (relevance.evidence_min_grade); a case with "
            "none is placed as unlabelled") in graded.out, graded
    assert re.search(r"^RANKED_OUT: 1 of 1, .* \(evidence: grade 2 or more\)$", graded.out, re.M), graded
    object_id = re.search(r"Diagnosis (sha256:\w+)", graded.out).group(1)
    inspected = project.run("inspect", object_id).out
    assert "hidden: RANKED_OUT, relevant_ranked_below_top_k" in inspected
    assert "Evidence in the run (relevance_unit doc: positions count documents, grade 2 or more):" in inspected

    project.write("oloproof.yaml", CONFIG + "relevance:\n  evidence_min_grade: 0\n")
    bad = project.run("run")
    assert bad.code == 2 and "evidence_min_grade must be a number above 0" in bad.err, bad


@pytest.mark.slow  # a full re-run of support_rag
def test_support_rag_token_budget_row_agrees_with_the_tutorials_full_re_run(support):
    """The tutorial's experiment, a new run with token_budget: 120 compared with the first: no
    verdict changes. The headroom's token-budget row must say the same, case by case."""
    project, run_id, doc, _ = support
    budget = next(r for r in doc["rows"] if r["intervention"] == "token-budget")
    config = (project.root / "oloproof.yaml").read_text(encoding="utf-8")
    project.write("oloproof.yaml", config.replace("token_budget: 40", "token_budget: 120"))
    try:
        rerun = run_id_of(project.run("run"))
    finally:
        project.write("oloproof.yaml", config)
    full, first = child_records(project, rerun), child_records(project, run_id)
    replayed, control = child_records(project, budget["run"]), child_records(project, budget["control_run"])
    verdict = lambda records, i: records[i]["judgments"]["answer_correct"]["status"]  # noqa: E731
    assert sorted(full) == sorted(replayed) == sorted(first)
    assert [i for i in full if verdict(full, i) != verdict(first, i)] == []  # the tutorial: no verdict changed
    assert {i: verdict(replayed, i) for i in full} == {i: verdict(full, i) for i in full}
    assert {i: verdict(control, i) for i in full} == {i: verdict(first, i) for i in full}
    assert budget["fixed"] == budget["broken"] == [] and budget["paired"]["difference"] == 0.0


@pytest.mark.slow  # a headroom of support_rag
def test_support_rag_distractors_at_first_as_diagnose_md_prints_it(support):
    """docs/diagnose.md: one distractor put first breaks the cases whose model answers from the first passage."""
    project, run_id, _, _ = support
    result = project.run("headroom", run_id, "--intervention", "distractors", "--criterion", "answer_correct",
                         "--format", "json")
    assert result.code == 0, result
    row = json.loads(result.out)["rows"][0]
    assert row["label"] == "distractors 1 at first" and len(row["broken"]) == 9 and row["fixed"] == []
    assert row["paired"]["display"] == {"difference": "-69.2 points", "interval": "[-95.5, -8.2]"}

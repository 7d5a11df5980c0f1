"""``oloproof judge validate``: the labels file, the agreement statistics (checked against
hand-computed values and statsmodels), the report, and the stored validation the gate reads.

The CLI tests validate the ``contains`` evaluator, which needs no provider: validation compares
any pass/fail criterion with human labels, and the LLM judges are exercised the same way in
tests/plugins/test_judges.py.
"""

from __future__ import annotations

import json
import sqlite3
from fractions import Fraction

import numpy as np
import pytest
from conftest import case

from oloproof import ConfigError, digest
from oloproof_core.statistics.intervals import clopper_pearson
from oloproof_core.workflows.validation import (
    Table, cohen_kappa, kappa_interval, kappa_standard_error, load_labels, one_sided, prediction_powered, rate,
)

# The worked example of docs/judges.md: 38 labelled cases.
#                judge pass  judge fail
#   human pass       20           2        (22)
#   human fail        3          13        (16)
#                   (23)        (15)
EXAMPLE = Table(pp=20, pf=3, fp=2, ff=13)


def test_kappa_by_hand():
    # p_o = 33/38; p_e = (23·22 + 15·16) / 38² = 746/1444; kappa = (1254 - 746) / (1444 - 746) = 508/698
    assert cohen_kappa(EXAMPLE) == pytest.approx(float(Fraction(508, 698)), abs=1e-15)
    assert cohen_kappa(EXAMPLE) == pytest.approx(0.727794, abs=5e-7)
    # 32 cases: p_o = 30/32, p_e = (21·21 + 11·11)/32² = 562/1024, kappa = (960 - 562)/(1024 - 562) = 398/462
    assert cohen_kappa(Table(pp=20, pf=1, fp=1, ff=10)) == pytest.approx(398 / 462, abs=1e-15)


def test_kappa_standard_error_by_hand():
    n, k = 38, Fraction(508, 698)
    p = {"pp": Fraction(20, n), "pf": Fraction(3, n), "fp": Fraction(2, n), "ff": Fraction(13, n)}
    judge_pass, judge_fail, human_pass, human_fail = Fraction(23, n), Fraction(15, n), Fraction(22, n), Fraction(16, n)
    p_e = judge_pass * human_pass + judge_fail * human_fail
    # Fleiss, Cohen & Everitt (1969): the diagonal, the off-diagonal and the correction term
    a = (p["pp"] * (1 - (judge_pass + human_pass) * (1 - k)) ** 2
         + p["ff"] * (1 - (judge_fail + human_fail) * (1 - k)) ** 2)
    b = (1 - k) ** 2 * (p["pf"] * (human_pass + judge_fail) ** 2 + p["fp"] * (human_fail + judge_pass) ** 2)
    c = (k - p_e * (1 - k)) ** 2
    variance = (a + b - c) / (n * (1 - p_e) ** 2)
    assert float(variance) == pytest.approx(0.0127961694, abs=1e-10)
    assert kappa_standard_error(EXAMPLE) == pytest.approx(float(variance) ** 0.5, rel=1e-12)
    assert kappa_standard_error(EXAMPLE) == pytest.approx(0.113120, abs=5e-7)
    # 0.727794 ± 1.959964 · 0.113120
    low, high = kappa_interval(EXAMPLE, 0.95)
    assert (low, high) == (pytest.approx(0.506082, abs=5e-7), pytest.approx(0.949505, abs=5e-7))


@pytest.mark.parametrize("cells", [(20, 3, 2, 13), (5, 1, 7, 2), (1, 9, 0, 3), (12, 0, 0, 9), (7, 6, 5, 8)])
def test_kappa_and_its_standard_error_equal_statsmodels(cells):
    from statsmodels.stats.inter_rater import cohens_kappa

    table = Table(pp=cells[0], pf=cells[1], fp=cells[2], ff=cells[3])
    reference = cohens_kappa(np.array([[cells[0], cells[1]], [cells[2], cells[3]]]))
    assert cohen_kappa(table) == pytest.approx(reference.kappa, abs=1e-12)
    assert kappa_standard_error(table) == pytest.approx(reference.std_kappa, abs=1e-12)
    low, high = kappa_interval(table, 0.95)
    assert low == pytest.approx(max(-1.0, reference.kappa_low), abs=1e-12)
    assert high == pytest.approx(min(1.0, reference.kappa_upp), abs=1e-12)


def test_rates_are_clopper_pearson():
    from statsmodels.stats.proportion import proportion_confint

    for k, n, low, high in [(33, 38, 0.719136, 0.955863), (20, 22, 0.708387, 0.988794), (13, 16, 0.543543, 0.959526)]:
        got = rate(k, n, 0.95)
        assert (got["low"], got["high"]) == (pytest.approx(low, abs=5e-7), pytest.approx(high, abs=5e-7))
        assert (got["low"], got["high"]) == pytest.approx(proportion_confint(k, n, alpha=0.05, method="beta"))
    assert rate(0, 0, 0.95) == {"k": 0, "n": 0, "value": None, "low": None, "high": None}


def test_degenerate_tables():
    only_passes = Table(pp=30, pf=0, fp=0, ff=0)  # nobody ever said fail: chance agreement is total
    assert cohen_kappa(only_passes) is None and kappa_standard_error(only_passes) is None
    assert kappa_interval(only_passes, 0.95) is None
    assert cohen_kappa(Table(pp=0, pf=0, fp=0, ff=0)) is None
    perfect = Table(pp=15, pf=0, fp=0, ff=15)
    assert cohen_kappa(perfect) == 1.0 and kappa_standard_error(perfect) == 0.0
    assert cohen_kappa(Table(pp=0, pf=10, fp=10, ff=0)) == -1.0
    humans_always_pass = Table(pp=7, pf=0, fp=3, ff=0)  # p_o = p_e = 0.7: kappa is 0 whatever the judge does
    assert cohen_kappa(humans_always_pass) == 0.0 and kappa_standard_error(humans_always_pass) is None
    assert kappa_interval(humans_always_pass, 0.95) is None
    assert one_sided(humans_always_pass) == "humans" and one_sided(Table(pp=4, pf=5, fp=0, ff=0)) == "judge"
    assert one_sided(EXAMPLE) is None


def test_prediction_powered_by_hand():
    # 10 unlabelled cases, 7 passed by the judge; 8 labelled: judge and human agree on 6, the judge passes
    # 2 the humans fail: errors f - y = 1, 1, 0 × 6, mean 0.25. θ = 0.7 - 0.25 = 0.45.
    # Variances with two pseudo-cases of each kind: f̃ = (7 + 1)/12, var 2/9; errors (2 + 1)/10 - (2/10)² = 0.26.
    # SE = √(2/90 + 0.26/8) = √0.0547222 = 0.233928
    got = prediction_powered([1.0] * 7 + [0.0] * 3, [1.0] * 6 + [0.0] * 2, [1.0] * 4 + [0.0] * 4, 0.95)
    assert got["value"] == pytest.approx(0.45, abs=1e-12)
    assert got["standard_error"] == pytest.approx(0.233928, abs=5e-7)
    assert "low" not in got and "high" not in got  # a large-sample figure: no printed interval
    assert got["labels"] == rate(4, 8, 0.95)  # the human-level interval: the labels' own Clopper-Pearson
    assert (got["unlabelled"], got["labelled"]) == (10, 8)
    assert prediction_powered([1.0], [1.0, 0.0], [1.0, 0.0], 0.95) is None
    assert prediction_powered([1.0, 0.0], [1.0], [1.0], 0.95) is None


def test_prediction_powered_never_claims_certainty():
    # Regression: with every case passed and no judge error the large-sample interval was [1.0, 1.0].
    got = prediction_powered([1.0] * 10, [1.0] * 25 + [0.0] * 5, [1.0] * 25 + [0.0] * 5, 0.95)
    assert got["value"] == 1.0 and got["standard_error"] > 0.05
    low, high = got["labels"]["low"], got["labels"]["high"]
    assert (low, high) == pytest.approx(clopper_pearson(25, 30, 0.95)) and high < 1.0


# -- the labels file -----------------------------------------------------------------------------


def test_labels_accept_booleans_and_pass_fail_words_with_optional_outputs(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "a", "label": true}\n\n{"id": "b", "label": "FAIL", "note": "wrong date"}\n'
                    '{"id": "c", "label": "pass", "output": {"answer": "x"}, "artifacts": {"context/v1": []}}\n')
    labels = load_labels(path)
    assert [(x.id, x.label, x.has_output, x.where) for x in labels] == [
        ("a", True, False, "labels.jsonl:1"), ("b", False, False, "labels.jsonl:3"),
        ("c", True, True, "labels.jsonl:4")]
    assert labels[2].output == {"answer": "x"} and labels[2].artifacts == {"context/v1": []}


@pytest.mark.parametrize(("line", "problem", "fix"), [
    ('{"id": "a", "lable": true}', "labels.jsonl:2: $.lable: unknown field 'lable'", "rename it to 'label'"),
    ('{"id": "a"}', "labels.jsonl:2: $.label: missing label", 'write {"id": "c001", "label": true}'),
    ('{"id": "a", "label": 1}', "labels.jsonl:2: label must be true/false or \"pass\"/\"fail\", got 1",
     "write true when the criterion holds for the case, false when it does not"),
    ('{"id": "a", "label": ["x"]}', "labels.jsonl:2: label must be", None),
    ('{"id": "a", "label": "yes"}', "labels.jsonl:2: label must be", None),
    ('{"id": 7, "label": true}', "labels.jsonl:2: $.id: expected a non-empty string, got 7 (int)", "quote the id"),
    ('{"id": "x", "label": true}', "labels.jsonl:2: $.id: duplicate id 'x' (first on line 1)",
     "give every labels line its own id"),
    ('{"id": "a", "label": true, "artifacts": {}}', "labels.jsonl:2: artifacts must be an object of lists", None),
    ('{"id": "a", "label": tru}', "labels.jsonl:2: invalid JSON", "write one JSON object per line"),
    ('["a", true]', "labels.jsonl:2: expected a JSON object, got list", None),
])
def test_label_errors_name_the_line_and_the_fix(tmp_path, line, problem, fix):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "x", "label": true}\n' + line + "\n")
    with pytest.raises(ConfigError) as caught:
        load_labels(path)
    assert f"{caught.value.where}: {caught.value.problem}".startswith(problem)
    if fix is not None:
        assert caught.value.fix == fix


def test_an_empty_or_absent_labels_file_is_an_error(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ConfigError, match="the labels file has no lines"):
        load_labels(tmp_path / "empty.jsonl")
    with pytest.raises(ConfigError, match="no such labels file"):
        load_labels(tmp_path / "absent.jsonl")


# -- the command ---------------------------------------------------------------------------------


def labelled_project(project, *, policy: bool = True, boom: bool = False) -> None:
    """The worked example: 38 cases whose ``contains`` verdicts and human labels make EXAMPLE."""
    kinds = [(True, True)] * 20 + [(True, False)] * 3 + [(False, True)] * 2 + [(False, False)] * 13
    rows = [case(i, ok=judge_pass) for i, (judge_pass, _) in enumerate(kinds)]
    labels = [{"id": row["id"], "label": human} for row, (_, human) in zip(rows, kinds)]
    if boom:
        rows.append(case(99, boom=True))
        labels.append({"id": "c099", "label": True})
    project.cases(rows)
    project.write("labels.jsonl", "".join(json.dumps(x) + "\n" for x in labels))
    if policy:
        with (project.root / "oloproof.yaml").open("a") as config:
            config.write("policy:\n  version: 1\n  rules: [{id: floor, metric: answer_correct, min: 0.3}]\n")


REPORT = """\
Judge validation of answer_correct (contains)
Labels: labels.jsonl · 38 labelled · 38 compared · 0 not judged
Outputs: run {run} (38 cases)

┌────────────┬────────────┬────────────┐
│            │ human pass │ human fail │
├────────────┼────────────┼────────────┤
│ judge pass │ 20         │ 3          │
│ judge fail │ 2          │ 13         │
└────────────┴────────────┴────────────┘
┌────────────────────┬──────────┬────────────────┬─────────┐
│ measure            │ estimate │ 95% interval   │ counts  │
├────────────────────┼──────────┼────────────────┼─────────┤
│ agreement          │ 86.8%    │ [71.9%, 95.6%] │ 33 / 38 │
│ Cohen's kappa      │ 0.728    │ [0.125, 0.971] │ n 38    │
│ true-positive rate │ 90.9%    │ [70.8%, 98.9%] │ 20 / 22 │
│ true-negative rate │ 81.3%    │ [54.3%, 96.0%] │ 13 / 16 │
└────────────────────┴──────────┴────────────────┴─────────┘
Bias (judge pass rate - human pass rate): +2.6 points [-18.3, +24.1]; false-pass rate (judge passes what people \
fail) at most 45.7%
Intervals: rates Clopper-Pearson (1934), exact; kappa from Clopper-Pearson bounds on the true-positive rate, \
the true-negative rate and the human pass rate (Šidák-combined, each at 1 - (1 - α/2)^(1/3)).
Requirement (policy judge_validation: lower bound of kappa at least 0.6, min_cases 30): not met: without labels \
of a run, rules on this \
criterion stay MANUAL_REVIEW (judge_not_validated)
Note: contains is not an LLM judge; the gate does not need this validation.
Validation: {id}
"""


def cells(out: str, measure: str) -> list[str]:
    """The cells after ``measure`` in the report's measures table."""
    for line in out.splitlines():
        parts = [part.strip() for part in line.split("│")[1:-1]]
        if parts and parts[0] == measure:
            return parts[1:]
    raise AssertionError(f"no row {measure!r} in:\n{out}")


def stored(project) -> list[tuple[str, dict]]:
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        return [(i, json.loads(r)) for i, r in db.execute("SELECT id, record FROM objects WHERE kind = 'judge_validation'")]


@pytest.mark.slow
def test_validate_reports_the_worked_example_and_stores_it_under_the_judges_identity(project):
    labelled_project(project)
    assert project.run("run").code == 0
    run_id = project.runs()[-1]
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    assert result.code == 3, result  # kappa 0.728, but its lower bound 0.125 is below min_kappa 0.6
    [(object_id, record)] = stored(project)
    assert result.out == REPORT.format(run=run_id, id=object_id)
    assert object_id == "sha256:" + digest(record)
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        header = json.loads(db.execute("SELECT header FROM runs").fetchone()[0])
    assert record["identity"] == digest(header["evaluators"]["answer_correct"])
    assert (record["n"], record["run"], record["kappa"]) == (38, run_id, pytest.approx(508 / 698))
    assert record["kappa_large_sample"] == [pytest.approx(0.506082, abs=5e-7), pytest.approx(0.949505, abs=5e-7)]
    assert record["requirement"]["met"] is False
    assert record["table"] == {"judge_pass_human_pass": 20, "judge_pass_human_fail": 3, "judge_fail_human_pass": 2,
                               "judge_fail_human_fail": 13}
    assert record["true_positive_rate"]["k"] == 20 and record["true_negative_rate"]["n"] == 16
    shown = project.run("inspect", object_id)
    assert shown.out == "".join(line + "\n" for line in record["lines"])
    again = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    assert again.out == result.out and len(stored(project)) == 1  # the same evidence has the same id


@pytest.mark.slow
def test_a_run_with_unlabelled_cases_gets_a_prediction_powered_pass_rate_beside_the_gates(project):
    labelled_project(project)
    rows = [json.loads(line) for line in (project.root / "cases.jsonl").read_text().splitlines()]
    project.cases(rows + [case(i, ok=i < 45) for i in range(38, 48)])  # 10 unlabelled, 7 pass
    project.run("run")
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    assert result.code == 3, result
    # judge only: 30 of 48 = 62.5%, Clopper-Pearson [0.47351, 0.76048]. Human labels: 22 of 38, Clopper-Pearson
    # [0.40821, 0.73690] (statsmodels). Prediction-powered: 0.7 - (3 - 2)/38 = 0.673684, an estimate without an interval.
    assert cells(result.out, "judge only") == ["62.5%", "[47.3%, 76.1%]", "48 judged"]
    assert cells(result.out, "human labels only") == ["57.9%", "[40.8%, 73.7%]", "38 labelled"]
    assert cells(result.out, "prediction-powered") == ["67.4%", "—", "10 judged + 38 labelled"]
    [(_, record)] = stored(project)
    ppi = record["run_rate"]["prediction_powered"]
    assert ppi["value"] == pytest.approx(0.7 - 1 / 38) and ppi["labels"] == rate(22, 38, 0.95)
    assert "Without labels of the run the gate decides on the judge-only interval; with them" in result.out


@pytest.mark.slow
def test_validate_judges_a_chosen_run_and_counts_what_could_not_be_judged(project):
    labelled_project(project, policy=False, boom=True)
    project.run("run")
    first = project.runs()[0]
    project.run("run")
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct",
                         "--run", first[4:14])
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[1] == ("Labels: labels.jsonl · 39 labelled · 38 compared · 1 not judged "
                        "(error: RuntimeError: boom 1)")
    assert lines[2] == f"Outputs: run {first} (39 cases)"
    assert "Requirement: none (the suite has no policy)" in lines


@pytest.mark.slow
def test_outputs_given_in_the_labels_need_no_run(project):
    project.cases([case(1), case(2)])
    project.write("labels.jsonl", '{"id": "c001", "label": true, "output": {"answer": "answer 1"}}\n'
                                  '{"id": "c002", "label": true, "output": {"answer": "something else"}}\n')
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    assert result.code == 0, result
    assert "Outputs: the labels file (2 cases)" in result.out
    assert cells(result.out, "true-positive rate") == ["50.0%", "[1.2%, 98.8%]", "1 / 2"]
    assert cells(result.out, "true-negative rate") == ["—", "—", "0 / 0"]
    assert cells(result.out, "Cohen's kappa") == ["0.000", "—", "n 2"]
    assert ("Kappa is 0 by construction and has no interval: the humans gave every case the same label; "
            "label cases of both kinds.") in result.out
    project.write("labels.jsonl", '{"id": "c001", "label": true, "output": {"answer": "answer 1"}}\n')
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    assert cells(result.out, "Cohen's kappa") == ["undefined", "—", "n 1"]
    assert "Kappa is undefined" in result.out


@pytest.mark.slow
def test_a_validation_below_the_requirement_exits_3(project):
    rows = [case(i, ok=i % 2 == 0) for i in range(12)]
    project.cases(rows)
    project.write("labels.jsonl", "".join(json.dumps({"id": r["id"], "label": True}) + "\n" for r in rows))
    with (project.root / "oloproof.yaml").open("a") as config:
        config.write("policy:\n  version: 1\n  rules: [{id: floor, metric: answer_correct, min: 0.1}]\n"
                     "  judge_validation: {min_kappa: 0.5, min_cases: 10}\n")
    project.run("run")
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    assert result.code == 3, result
    assert ("Requirement (policy judge_validation: lower bound of kappa at least 0.5, min_cases 10): not met: without labels "
            "of a run, rules on this "
            "criterion stay MANUAL_REVIEW (judge_not_validated)") in result.out


@pytest.mark.parametrize(("args", "labels", "message"), [
    (["--criterion", "answer_corect"], '{"id": "c001", "label": true}',
     "no evaluator of oloproof.yaml defines criterion 'answer_corect'; fix: did you mean 'answer_correct'?"),
    (["--criterion", "answer_correct"], '{"id": "c0001", "label": true}',
     "labels.jsonl:1: case 'c0001' is not in oloproof.yaml's cases; fix: did you mean 'c001'?"),
    (["--criterion", "answer_correct"], '{"id": "c001", "label": true}',
     "no run to take the outputs from; fix: run `oloproof run` first"),
    (["--criterion", "answer_correct", "--run", "run_nope"], '{"id": "c001", "label": true}', "no run run_nope"),
    (["--criterion", "answer_correct"], '{"id": "c001", "label": true, "output": "x", "artifacts": {"contxt/v1": []}}',
     "labels.jsonl:1: unknown artifact 'contxt/v1'"),
])
def test_validate_errors_exit_2_with_a_fix(project, args, labels, message):
    project.cases([case(1), case(2)])
    project.write("labels.jsonl", labels + "\n")
    result = project.run("judge", "validate", "--labels", "labels.jsonl", *args)
    assert result.code == 2, result
    assert message in result.err


@pytest.mark.slow
def test_a_labelled_case_outside_the_run_is_an_error(project):
    project.cases([case(1)])
    project.run("run")
    project.cases([case(1), case(2)])
    project.write("labels.jsonl", '{"id": "c002", "label": true}\n')
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "answer_correct")
    assert result.code == 2
    assert "labels.jsonl:1: case 'c002' is not in run run_" in result.err

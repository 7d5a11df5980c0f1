"""The human-level interval of a judge criterion, the gate deciding on it, admission by bias, and
the label flow (plan, terminal labelling, export/import) on the judges example."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import beta

from oloproof_core.decisions.gate import Policy, decide_policy
from oloproof_core.decisions.threshold import Rule
from oloproof_core.model.records import Judgment
from oloproof_core.statistics.admission import admit_by_bias
from oloproof_core.statistics.human_level import HumanLevelMetric, Labelled, human_interval, plan_labels

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("human_level_simulation",
                                                  ROOT / "scripts" / "human_level_simulation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cp(k, n, one_sided_alpha):
    low = 0.0 if k == 0 else beta.ppf(one_sided_alpha, k, n - k + 1)
    high = 1.0 if k == n else beta.ppf(1 - one_sided_alpha, k + 1, n - k)
    return low, high


@pytest.mark.parametrize("passes, judged, t", [
    (600, 1000, Labelled(pp=18, pf=2, fp=2, ff=18)),
    (40, 60, Labelled(pp=11, pf=0, fp=2, ff=3)),
    (0, 50, Labelled(fp=3, ff=17)),
    (50, 50, Labelled(pp=20)),
    (10, 100, Labelled()),
])
def test_the_interval_is_the_union_bound_of_exact_bounds_computed_independently(passes, judged, t):
    alpha = 0.05
    pi = _cp(passes, judged, alpha / 20)
    a = _cp(t.pp, t.pp + t.pf, alpha / 5) if t.pp + t.pf else (0.0, 1.0)
    b = _cp(t.fp, t.fp + t.ff, alpha / 5) if t.fp + t.ff else (0.0, 1.0)
    low = min(p * a[0] + (1 - p) * b[0] for p in pi)
    high = max(p * a[1] + (1 - p) * b[1] for p in pi)
    assert human_interval(passes, judged, t, 0.95) == pytest.approx((low, high), abs=1e-9)


def test_missing_units_count_at_the_worst_and_the_best_human_value():
    metric = HumanLevelMetric(Labelled(pp=9, pf=1, fp=1, ff=9), observed=20)
    values = [1.0] * 10 + [0.0] * 10
    low, high = metric.interval(values, 0.95)
    worst_low, _ = metric.interval(values + [0.0] * 5, 0.95)
    _, best_high = metric.interval(values + [1.0] * 5, 0.95)
    assert worst_low == pytest.approx(low * 20 / 25) and best_high == pytest.approx((high * 20 + 5) / 25)


def _rule_policy(minimum: float) -> Policy:
    return Policy(version=1, rules=[Rule(id="floor", metric="grounded", min=minimum)])


class _NoStore:
    def list_objects(self, kind):
        return []


def test_a_judge_rule_decides_on_the_human_level_with_labels_and_waits_for_a_person_without():
    judgments = {"grounded": [Judgment(status="pass", value=1.0)] * 800 + [Judgment(status="fail", value=0.0)] * 200}

    class Proportion:
        def interval(self, values, confidence):
            from oloproof_core.statistics.intervals import clopper_pearson
            return clopper_pearson(int(sum(values)), len(values), confidence)

    metrics = {"grounded": Proportion()}
    judges = {"grounded": "digest"}
    without = decide_policy(_rule_policy(0.7), judgments, metrics, 0.95, judges, _NoStore())
    assert (without[0].verdict, without[0].reason) == ("MANUAL_REVIEW", "judge_not_validated")
    # The judge passes 80%; people agree with 45 of 50 of its passes and pass 2 of 25 of its fails.
    human = {"grounded": HumanLevelMetric(Labelled(pp=45, pf=5, fp=2, ff=23), observed=1000)}
    low, _ = human["grounded"].interval([1.0] * 800 + [0.0] * 200, 0.95)
    assert 0.55 < low < 0.7
    passed = decide_policy(_rule_policy(0.55), judgments, metrics, 0.95, judges, _NoStore(), human=human)
    undecided = decide_policy(_rule_policy(0.7), judgments, metrics, 0.95, judges, _NoStore(), human=human)
    assert passed[0].verdict == "PASS" and undecided[0].verdict == "INSUFFICIENT_EVIDENCE"
    # The judge's rate alone would PASS 0.7 once validated: the human level is what holds it back.
    assert Proportion().interval([1.0] * 800 + [0.0] * 200, 0.95)[0] > 0.7


def test_the_plan_asks_for_labels_that_would_decide_if_the_agreement_holds():
    n1, n0 = plan_labels(600, 1000, Labelled(), 0.45, 0.95)
    a, b = round(n1 * 0.9), round(n0 * 0.1)
    assert human_interval(600, 1000, Labelled(pp=a, pf=n1 - a, fp=b, ff=n0 - b), 0.95)[0] >= 0.45
    assert plan_labels(30, 60, Labelled(pp=10, pf=10, fp=10, ff=10), 0.5, 0.95) is None


def test_fast_subset_of_the_simulation_covers_and_bounds_false_pass():
    script = _script()
    rows = list(script.coverage_rows(300, grid=[(20, 100), (50, 1000)]))
    for _, _, cells, coverage, false_pass, _, _ in rows:
        assert cells == 33 and coverage >= 0.95 and false_pass <= 0.025
    assert max(r[5] for r in rows) > 0.5  # the judge's own rate PASSes a biased judge far more often than 2.5%


@pytest.mark.slow
def test_the_documented_simulation_tables_are_what_the_script_prints():
    script = _script()
    page = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8").splitlines()
    for row in script.coverage_rows(4000):
        line = script.format_coverage(row)
        assert line in page, line
        assert row[3] >= 0.95 and row[4] <= 0.025
    for row in script.needed_rows(400):
        assert script.format_needed(row) in page, script.format_needed(row)


def test_admission_by_bias_admits_an_unbiased_judge_and_refuses_a_biased_one():
    good = admit_by_bias(135, 8, 7, 150, 0.95, 0.10, 0.5)  # 300 labels, 95% agreement, no bias
    biased = admit_by_bias(120, 30, 0, 150, 0.95, 0.10, 0.5)  # passes 30 human fails, misses none
    assert good["met"] and not biased["met"]
    assert good["bias_bounds"][0] > -0.1 and biased["bias_bounds"][1] > 0.1


def test_a_judge_at_the_bias_limit_is_admitted_at_most_alpha_over_two():
    assert _script().false_admission(300) <= 0.025


# The flow on the shipped judges example, through the real command line.

def _olo(*args, cwd, stdin=None):
    import os

    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "oloproof", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, input=stdin)


def _truth(case: dict) -> bool:
    topic, variant = case["input"]["topic"], case["input"]["variant"]
    wrong = {"refunds": 1, "seats": 0, "export": 1, "sso": 0, "trial": 1}
    return topic == "hours" or variant % 2 != wrong[topic]


def test_plan_label_in_the_terminal_then_the_run_decides_on_the_human_level(tmp_path):
    assert _olo("init", "--example", "judges", "demo", cwd=tmp_path).returncode == 0
    demo = tmp_path / "demo"
    first = _olo("run", cwd=demo)
    assert first.returncode == 3 and "MANUAL_REVIEW" in first.stdout and "oloproof label plan" in first.stdout
    plan = _olo("label", "plan", "latest", cwd=demo)
    assert plan.returncode == 0, plan.stderr
    assert "about 13 labels would decide it" in plan.stdout and "9 of the judge's passes, 4 of its fails" in plan.stdout
    cases = {json.loads(line)["id"]: json.loads(line) for line in (demo / "cases.jsonl").read_text().splitlines()}
    order = _planned(demo)
    answers = "".join(("n\nchecked by the test\n" if i == 0 else "") + ("p\n" if _truth(cases[c]) else "f\n")
                      for i, c in enumerate(order))
    labelled = _olo("label", "latest", "--terminal", "--labeller", "tester", cwd=demo, stdin=answers)
    assert labelled.returncode == 0, labelled.stderr
    out = labelled.stdout
    assert "Done: 13 labels stored" in out
    first_case = out.index("── case 1 of 13")
    assert out.index("Answer: ", first_case) < out.index("Judge: ", first_case)  # the verdict comes after
    assert "Question: " in out and "Context: [" in out
    second = _olo("run", cwd=demo)
    assert second.returncode == 0, second.stdout
    assert "│ grounded-floor │ grounded │ PASS" in second.stdout
    assert "Rule grounded-floor decides on grounded human-level, from 13 labels: [21.8%, 94.4%]" in second.stdout
    # Export, then import into another store: the same labels, nothing new the second time.
    assert _olo("label", "export", "labels.jsonl", cwd=demo).returncode == 0
    rows = [json.loads(line) for line in (demo / "labels.jsonl").read_text().splitlines()]
    assert len(rows) == 13 and {r["labeller"] for r in rows} == {"tester"}
    assert [r["note"] for r in rows if r["note"]] == ["checked by the test"]
    again = _olo("label", "import", "labels.jsonl", cwd=demo)
    assert "Imported 0 new labels" in again.stdout


def _planned(demo: Path) -> list[str]:
    import os

    here = os.getcwd()
    os.chdir(demo)
    try:
        from oloproof_core.storage.labels import latest_plan
        from oloproof_core.workflows.project import Project

        store = Project(None, None).store
        return latest_plan(store, store.resolve_run("latest"))[1]["cases"]
    finally:
        os.chdir(here)


def test_a_policy_can_admit_by_bias_where_kappa_would_not():
    from oloproof_core.decisions.gate import JudgeValidation, requirement_met

    # 300 labels of a 95%-accurate, unbiased judge at prevalence 0.8: kappa's lower bound is below 0.6.
    record = {"n": 300, "confidence_level": 0.95, "kappa_bounds": [0.55, 0.95],
              "table": {"judge_pass_human_pass": 232, "judge_pass_human_fail": 8, "judge_fail_human_pass": 7,
                        "judge_fail_human_fail": 53}}
    assert not requirement_met(record, JudgeValidation())
    assert requirement_met(record, JudgeValidation(admit_by="bias"))
    assert not requirement_met(record, JudgeValidation(admit_by="bias", max_bias=0.02))


def test_a_labels_file_the_policy_names_must_exist(tmp_path):
    assert _olo("init", "--example", "judges", "demo", cwd=tmp_path).returncode == 0
    config = tmp_path / "demo" / "oloproof.yaml"
    config.write_text(config.read_text().replace("  rules:\n", "  labels: {grounded: nowhere.jsonl}\n  rules:\n"))
    result = _olo("run", cwd=tmp_path / "demo")
    assert result.returncode == 2
    assert "$.policy.labels.grounded: labels file 'nowhere.jsonl' of 'grounded' not found" in result.stderr

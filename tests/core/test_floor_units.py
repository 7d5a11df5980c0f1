"""A compare floor decides one run's values exactly as that run's gate does (decisions/threshold.py).

Two parts. The seeded simulation of scripts/floor_units.py: at the threshold, the floor on
clustered runs (ICC 0.1–0.8, 5–40 clusters, both estimands) and on trials runs PASSes at most 2.5%
of the time, where compare's floor before this change (Clopper–Pearson over the cases as if
independent) did not: a fast subset by default, the full grid under the slow mark. And the real
command line: on a clustered, a trials and a sequential run, `oloproof run`'s gate and `oloproof
compare`'s floor on that run give the same verdict, on data where the floor of before gave another.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from conftest import CONFIG, case

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("floor_units", ROOT / "scripts" / "floor_units.py")
floor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(floor)

FAST = 200
RUN = re.compile(r"^Run (run_[0-9A-HJKMNP-TV-Z]{26}) ", re.M)


@pytest.mark.parametrize("index", floor.FAST_CLUSTERS)
def test_a_floor_on_clusters_holds_its_level_at_the_threshold(index):
    clusters, p, rho, p_large = floor.CLUSTER_POINTS[index]
    found = floor.cluster_cell(index, clusters, p, rho, p_large, FAST)["false_pass"]
    assert found["cluster-means"] <= floor.LIMIT and found["cases"] <= floor.LIMIT, found
    if rho >= 0.8:  # the floor of before, over cases as if independent, does not hold it
        assert found["before"] > floor.LIMIT + floor.tolerance(FAST), found


@pytest.mark.parametrize("index", floor.FAST_TRIALS)
def test_a_floor_on_trials_holds_its_level_at_the_threshold(index):
    cases, trials, p, concentration = floor.TRIAL_POINTS[index]
    found = floor.trial_cell(index, cases, trials, p, concentration, FAST)["false_pass"]
    assert found["shipped"] <= floor.LIMIT, found


@pytest.mark.slow
def test_the_full_floor_tables_hold_and_are_the_documented_ones():
    docs = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    for line in floor.cluster_table(2000) + floor.trial_table(2000):
        assert line in docs, line
    for index, (clusters, p, rho, p_large) in enumerate(floor.CLUSTER_POINTS):
        found = floor.cluster_cell(index, clusters, p, rho, p_large, 2000)["false_pass"]
        assert max(found["cluster-means"], found["cases"]) <= floor.LIMIT, (index, found)
    for index, (cases, trials, p, concentration) in enumerate(floor.TRIAL_POINTS):
        assert floor.trial_cell(index, cases, trials, p, concentration, 2000)["false_pass"]["shipped"] <= floor.LIMIT


def test_a_floor_over_single_case_units_is_clopper_pearson():
    """Clusters of one case judged pass or fail once are 0/1 by construction: the exact interval."""
    from oloproof_core.decisions.threshold import Rule, decide_on_run, run_metrics
    from oloproof_core.model.records import Judgment
    from oloproof_core.statistics.intervals import clopper_pearson
    from oloproof_core.statistics.units import Design, group

    judgments = [Judgment.of(i % 5 != 0) for i in range(40)]  # 32 of 40
    design = Design(cluster="metadata.source", estimand="cases")
    metric = run_metrics({"a": floor.Proportion()}, design, None)["a"]
    units = group(judgments, [f"s{i}" for i in range(40)])
    summary = metric.summarize(units, 0.95)
    assert (summary.low, summary.high) == clopper_pearson(32, 40, 0.95)
    header = {"design": design.record()}
    low = clopper_pearson(32, 40, 0.95)[0]
    for threshold, verdict in ((low - 1e-6, "PASS"), (low + 1e-6, "INSUFFICIENT_EVIDENCE")):
        rule = Rule(id="f", metric="a", min=threshold)
        assert decide_on_run(rule, header, floor.Proportion(), judgments, [f"s{i}" for i in range(40)],
                             0.95).verdict == verdict
    # one cluster of two cases: no longer 0/1 by construction, the betting interval applies
    units = group(judgments, ["s0"] + [f"s{i}" for i in range(39)])
    assert (metric.summarize(units, 0.95).low, metric.summarize(units, 0.95).high) != clopper_pearson(32, 40, 0.95)


def test_the_case_weighted_interval_is_the_documented_construction():
    """Against a plain loop over the clusters and scipy's brentq (test_trials.case_weighted_reference);
    with equal sizes it is the betting interval of the cluster means, with single cases of the cases."""
    import numpy as np
    from test_trials import case_weighted_reference

    from oloproof_core.statistics.intervals import betting_interval
    from oloproof_core.statistics.weighted import case_weighted_interval

    rng = np.random.default_rng(7)
    for _ in range(5):
        sizes = [int(n) for n in rng.integers(1, 7, size=int(rng.integers(3, 15)))]
        sums = [float(rng.binomial(n, rng.uniform(0.2, 0.95))) for n in sizes]
        got, reference = case_weighted_interval(sums, sizes), case_weighted_reference(sums, sizes)
        assert abs(got[0] - reference[0]) < 1e-9 and abs(got[1] - reference[1]) < 1e-9, (sums, sizes)
    means = [1.0, 0.75, 0.5, 1.0, 0.25]
    got = case_weighted_interval([4 * m for m in means], [4] * 5)
    assert np.allclose(got, betting_interval(means), atol=1e-9)
    got = case_weighted_interval([0.3, 1.0, 0.0, 0.9], [1, 1, 1, 1])
    assert np.allclose(got, betting_interval([0.3, 1.0, 0.0, 0.9]), atol=1e-9)


# -- the command line ----------------------------------------------------------------------------

TRIAL_APP = '''
from oloproof import current_case, system

@system(name="trial-echo", version="1")
def run(input):
    # the first `passes` of a case's trials answer right
    return {"answer": input["q"] if current_case().trial < input["passes"] else "nope"}
'''


def policy_text(rule: str) -> str:
    return ("policy:\n  version: 1\n  confidence_level: 0.95\n"
            f"  block_on: [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]\n  rules:\n    - {{{rule}}}\n")


def floor_policy(project, minimum: float) -> None:
    project.write("compare.yaml", "version: 1\nconfidence_level: 0.95\n"
                  "block_on: [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]\nrules:\n"
                  f"  - {{id: floor, metric: answer_correct, kind: floor, min: {minimum}}}\n")


def verdicts(project, *run_args: str) -> tuple[str, str, object, object]:
    """The run's verdict of its rule `floor`, and compare's verdict of its floor on that run."""
    ran = project.run("run", *run_args)
    assert ran.code in (0, 1, 3), ran
    run_id = RUN.search(ran.out).group(1)
    gate = next(line for line in ran.out.splitlines() if line.startswith("│ floor "))
    run_verdict = [c.strip() for c in gate.strip("│").split("│")][2]
    compared = project.run("compare", run_id, run_id, "--policy", "compare.yaml")
    assert compared.code in (0, 1, 3), compared
    line = next(x for x in compared.out.splitlines() if x.startswith("  floor  "))
    return run_verdict, line.strip().split("  ")[3], ran, compared


def clustered_cases() -> list[dict]:
    """24 cases in 4 documents of 6: d0 and d1 pass, d2 five of six, d3 two of six (19 of 24)."""
    out = []
    for i in range(24):
        doc, k = divmod(i, 6)
        ok = doc < 2 or (doc == 2 and k < 5) or (doc == 3 and k < 2)
        c = case(i, ok=ok)
        c["metadata"] = {"doc": f"d{doc}"}
        out.append(c)
    return out


@pytest.mark.parametrize("setting", ["", "max_cluster_size: 6\n"], ids=["cluster-means", "case-weighted"])
def test_run_and_compare_floor_agree_on_a_clustered_suite(project, setting):
    project.cases(clustered_cases())
    project.write("oloproof.yaml", CONFIG + "cluster: metadata.doc\n" + setting +
                  policy_text("id: floor, metric: answer_correct, min: 0.5"))
    floor_policy(project, 0.5)
    run_verdict, compare_verdict, ran, compared = verdicts(project)
    # four clusters cannot show 50% with confidence; 19 of 24 independent cases would ([57.8%, 92.9%])
    assert run_verdict == "INSUFFICIENT_EVIDENCE", ran
    assert compare_verdict == run_verdict, compared
    estimand = "mean of 24 cases in 4 clusters" if setting else "mean of 4 cluster means (24 cases)"
    assert estimand in ran.out


def test_run_and_compare_floor_agree_on_a_trials_suite(project):
    # 20 cases of 5 trials: ten right 5 times, six 4 times, three 3 times, one never (mean 0.83);
    # betting over the case means gives [58.3%, 94.3%], Clopper–Pearson on the rounded sum 17 / 20
    # [62.1%, 96.8%]: a floor at 60% read the two differently
    passes = [5] * 10 + [4] * 6 + [3] * 3 + [0]
    project.write("app.py", TRIAL_APP)
    project.cases([case(i, passes=n) for i, n in enumerate(passes)])
    project.write("oloproof.yaml", CONFIG.replace("name: echo", "name: trial-echo") + "trials: 5\n" +
                  policy_text("id: floor, metric: answer_correct, min: 0.6"))
    floor_policy(project, 0.6)
    run_verdict, compare_verdict, ran, compared = verdicts(project)
    assert "mean of 20 cases × 5 trials" in ran.out, ran
    assert run_verdict == "INSUFFICIENT_EVIDENCE", ran
    assert compare_verdict == run_verdict, compared


def test_run_and_compare_floor_agree_on_a_sequential_run(project):
    # 40 cases, 36 right: a run that goes to the end decides with the betting confidence sequence
    # ([70.2%, 99.0%] at 40), where Clopper–Pearson over the 40 cases gives [76.3%, 97.2%]
    project.cases([case(i, ok=i % 10 != 0) for i in range(40)])
    project.write("oloproof.yaml", CONFIG + policy_text("id: floor, metric: answer_correct, min: 0.75"))
    floor_policy(project, 0.75)
    run_verdict, compare_verdict, ran, compared = verdicts(project, "--until-decided", "--batch", "40")
    assert "Sequential:" in ran.out, ran
    assert compare_verdict == run_verdict, (ran, compared)


def test_single_case_clusters_print_the_exact_interval(project):
    # 19 of 40 cases, each its own cluster: Clopper-Pearson [31.5%, 63.9%], not betting's [24.4%, 71.3%]
    project.cases([case(i, ok=i < 19) for i in range(40)])
    project.write("oloproof.yaml", CONFIG + "cluster: id\n")
    ran = project.run("run")
    assert ran.code == 0, ran
    row = next(line for line in ran.out.splitlines() if line.startswith("│ answer_correct "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[1:] == ["47.5%", "[31.5%, 63.9%]", "mean of 40 cluster means (40 cases) · 0 clusters missing · "
                                                     "0 excluded"], ran


def test_a_failure_count_counts_cases_in_a_clustered_run(project):
    """max_failures counts failed cases, whatever the unit: before, a clustered run's units (cluster
    means) had no failures to count, and `max_failures: 0` PASSed with three failed cases."""
    cases = []
    for i in range(12):
        c = case(i, ok=i % 4 != 0)
        c["metadata"] = {"doc": f"d{i // 3}"}
        cases.append(c)
    project.cases(cases)
    project.write("oloproof.yaml", CONFIG + "cluster: metadata.doc\n" +
                  policy_text("id: floor, metric: answer_correct, kind: observed_count, max_failures: 0"))
    ran = project.run("run")
    assert ran.code == 1, ran
    row = next(line for line in ran.out.splitlines() if line.startswith("│ floor "))
    assert [c.strip() for c in row.strip("│").split("│")][2:] == ["FAIL", "observed_failures_exceed_limit"]
    project.write("oloproof.yaml", CONFIG + "cluster: metadata.doc\n" +
                  policy_text("id: floor, metric: answer_correct, kind: observed_count, max_failures: 3"))
    assert project.run("run").code == 0

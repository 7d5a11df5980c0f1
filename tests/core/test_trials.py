"""Repeated trials and clustered cases through the command line, on the seeded nondeterministic
example (examples/flaky_rag, SEED = 16) and on small projects whose numbers are computed here
independently (plain loops and scipy, not the engine's functions)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import case, olo
from test_cli_run import POLICY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flaky_rag"


def rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in text.splitlines()
            if line.startswith("│")]


def row(text: str, name: str) -> list[str]:
    return next(r for r in rows(text) if r[0] == name)


def stored(root: Path, run_id: str) -> tuple[dict, dict, list[dict]]:
    with sqlite3.connect(root / ".oloproof" / "store.db") as con:
        header, summary = con.execute("SELECT header, summary FROM runs WHERE id = ?", (run_id,)).fetchone()
        records = [json.loads(r[0]) for r in con.execute("SELECT record FROM run_cases WHERE run_id = ? ORDER BY idx",
                                                           (run_id,))]
    return json.loads(header), json.loads(summary), records


def run_id(result) -> str:
    return result.out.splitlines()[0].split()[1]


def betting_reference(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """The betting interval of docs/statistics.md, computed independently: a plain loop over the
    values for the capital, scipy's brentq for the roots."""
    import math

    from scipy.optimize import brentq

    alpha, bets = 1 - confidence, [d / 20 for d in range(1, 20)]

    def log_capital(m: float, up: bool) -> float:
        total = 0.0
        for u in bets:
            log_product = 0.0
            for y in values:
                log_product += math.log(1 + (u / m) * (y - m)) if up else math.log(1 - (u / (1 - m)) * (y - m))
            total += math.exp(log_product)
        return math.log(total / len(bets)) - math.log(2 / alpha)

    mean = sum(values) / len(values)
    low = brentq(log_capital, 1e-12, mean, args=(True,), xtol=1e-13) if log_capital(1e-12, True) > 0 else 0.0
    high = brentq(log_capital, mean, 1 - 1e-12, args=(False,), xtol=1e-13) if log_capital(1 - 1e-12, False) > 0 else 1.0
    return low, high


def outward(low: float, high: float) -> str:
    import math

    return f"[{math.floor(1000 * low + 1e-6) / 10:.1f}%, {math.ceil(1000 * high - 1e-6) / 10:.1f}%]"


@pytest.fixture(scope="module")
def flaky(tmp_path_factory) -> dict:
    """The example run with 3 trials, then 5 (the example's own setting), then clustered."""
    root = tmp_path_factory.mktemp("flaky") / "flaky_rag"
    shutil.copytree(EXAMPLE, root)
    three = olo("run", "--trials", "3", cwd=root)
    five = olo("run", cwd=root)
    again = olo("run", cwd=root)
    clustered = olo("run", "--config", "clustered.yaml", cwd=root)
    return {"root": root, "three": three, "five": five, "again": again, "clustered": clustered}


@pytest.mark.slow  # shares the example runs of the `flaky` fixture (about 30 seconds)
def test_trials_print_the_instability_line_and_pass_all_k(flaky):
    five = flaky["five"]
    assert five.code in (0, 1, 3), five
    header, summary, records = stored(flaky["root"], run_id(five))
    assert header["design"]["trials"] == 5
    # every trial's execution and judgments are stored
    assert all(len(r["trials"]) == 5 for r in records)
    verdicts = {r["id"]: [t["judgments"]["answer_correct"]["status"] for t in r["trials"]] for r in records}
    unstable = sum(1 for v in verdicts.values() if len(set(v)) > 1)
    n = len(records)
    assert 0 < unstable < n  # the seeded system is nondeterministic on some cases, steady on others
    from scipy.stats import beta

    low = beta.ppf(0.025, unstable, n - unstable + 1)
    high = beta.ppf(0.975, unstable + 1, n - unstable)
    share = f"{round(1000 * unstable / n) / 10:.1f}%"
    assert (f"Unstable: {unstable} of {n} cases changed verdict across 5 trials (answer_correct): "
            f"{share} {outward(low, high)} at 95%") in five.out.splitlines()
    # pass_all_k: a case passes only if every trial passed, with the exact interval over cases
    passing = sum(1 for v in verdicts.values() if set(v) == {"pass"})
    assert row(five.out, "answer_correct.pass_all_k")[3] == f"{passing} / {n} observed · 0 missing · 0 excluded"
    # the criterion is the mean over cases of each case's pass fraction, with the betting interval
    fractions = [sum(s == "pass" for s in v) / 5 for v in verdicts.values()]
    estimate, interval, counts = row(five.out, "answer_correct")[1:]
    assert counts == f"mean of {n} cases × 5 trials · 0 missing · 0 excluded"
    assert interval == outward(*betting_reference(fractions))
    assert estimate == f"{round(1000 * sum(fractions) / n) / 10:.1f}%"


@pytest.mark.slow  # shares the example runs of the `flaky` fixture (about 30 seconds)
def test_a_policy_gates_on_pass_all_k(flaky):
    five = flaky["five"]
    decided = {r[0]: r[2] for r in rows(five.out) if r[0] in ("answer-floor", "reliable-answers")}
    assert set(decided) == {"answer-floor", "reliable-answers"}
    _, summary, _ = stored(flaky["root"], run_id(five))
    assert {d["metric"] for d in summary["decisions"]} == {"answer_correct", "answer_correct.pass_all_k"}


@pytest.mark.slow  # shares the example runs of the `flaky` fixture (about 30 seconds)
def test_the_cache_keeps_each_trial_apart_and_reuses_them(flaky):
    three, five, again = flaky["three"], flaky["five"], flaky["again"]
    assert "Cache: execution 0 hit/78 miss" in three.out, three
    assert "Cache: execution 78 hit/52 miss" in five.out, five  # --trials 5 after 3: only 2 more a case
    assert "Cache: execution 130 hit/0 miss" in again.out, again
    same = lambda out: out.split("\n", 1)[1].split("Cache:")[0]  # noqa: E731
    assert same(again.out) == same(five.out)  # the same numbers from the cache


@pytest.mark.slow  # shares the example runs of the `flaky` fixture (about 30 seconds)
def test_without_trials_the_first_trial_keeps_the_cache_key(flaky):
    # the clustered suite runs each case once: its executions are the trial runs' first trials
    assert "Cache: execution 26 hit/0 miss" in flaky["clustered"].out, flaky["clustered"]


def case_weighted_reference(sums: list[float], sizes: list[int], confidence: float = 0.95) -> tuple[float, float]:
    """The case-weighted interval of docs/statistics.md, computed independently: a plain loop over
    the clusters for the capital of S_g - θ n_g (bounded by the largest cluster), scipy's brentq."""
    import math

    from scipy.optimize import brentq

    alpha, bets, top = 1 - confidence, [d / 20 for d in range(1, 20)], max(sizes)

    def log_capital(theta: float, up: bool) -> float:
        total = 0.0
        for u in bets:
            log_product = 0.0
            for s, n in zip(sums, sizes):
                x = (s - theta * n) / top
                log_product += math.log(1 + (u / theta) * x) if up else math.log(1 - (u / (1 - theta)) * x)
            total += math.exp(log_product)
        return math.log(total / len(bets)) - math.log(2 / alpha)

    mean = sum(sums) / sum(sizes)
    low = brentq(log_capital, 1e-12, mean, args=(True,), xtol=1e-13) if log_capital(1e-12, True) > 0 else 0.0
    high = brentq(log_capital, mean, 1 - 1e-12, args=(False,), xtol=1e-13) if log_capital(1 - 1e-12, False) > 0 else 1.0
    return low, high


@pytest.mark.slow  # shares the example runs of the `flaky` fixture (about 30 seconds)
def test_a_clustered_interval_is_computed_over_clusters(flaky):
    """clustered.yaml declares max_cluster_size, so its estimand is case-weighted: every case counts
    once, and the interval is the betting interval of S_g - θ n_g over the clusters."""
    out = flaky["clustered"].out
    header, summary, records = stored(flaky["root"], run_id(flaky["clustered"]))
    assert header["design"]["estimand"] == "cases"
    clusters: dict[str, list[float]] = {}
    for r in records:
        clusters.setdefault(r["case"]["metadata"]["source"], []).append(r["judgments"]["answer_correct"]["value"])
        assert r["cluster"] == r["case"]["metadata"]["source"]
    sums, sizes = [sum(v) for v in clusters.values()], [len(v) for v in clusters.values()]
    estimate, interval, counts = row(out, "answer_correct")[1:]
    assert counts == f"mean of 26 cases in {len(clusters)} clusters · 0 clusters missing · 0 excluded"
    assert interval == outward(*case_weighted_reference(sums, sizes))
    assert estimate == f"{round(1000 * sum(sums) / sum(sizes)) / 10:.1f}%"
    assert f"Clusters: 26 cases in {len(clusters)} clusters by metadata.source; every estimate is case-weighted " \
           "(each case counts once), its interval over clusters" in out
    assert "Large clusters: 2 of 8 hold more than 3 cases: kb-refunds (4), kb-sso (4)" in out
    assert summary["clusters"]["large"] == [{"cluster": "kb-refunds", "cases": 4}, {"cluster": "kb-sso", "cases": 4}]
    # the naive interval over 25 independent cases would be narrower; the gate reads the clustered one
    assert "INSUFFICIENT_EVIDENCE" in row(out, "answer-floor")


CLUSTERED = "\ncluster: metadata.doc\nslices: [metadata.topic]\nmin_slice_support: 1" + POLICY


def clustered_cases() -> list[dict]:
    """Twelve cases in four documents; documents d0 and d1 pass, d2 half, d3 fails."""
    out = []
    for i in range(12):
        doc = i // 3
        ok = doc in (0, 1) or (doc == 2 and i % 3 == 0)
        c = case(i, ok=ok)
        c["metadata"] = {"doc": f"d{doc}", "topic": "a" if doc < 2 else "b"}
        out.append(c)
    return out


def test_the_gate_and_the_slices_honour_clusters(project):
    project.cases(clustered_cases())
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + CLUSTERED % "0.10")
    result = project.run("run")
    means = [1.0, 1.0, 1 / 3, 0.0]
    assert row(result.out, "answer_correct")[2] == outward(*betting_reference(means))
    assert row(result.out, "answer_correct")[3] == "mean of 4 cluster means (12 cases) · 0 clusters missing · 0 excluded"
    # four clusters cannot show 10% with confidence, whereas 7 passes of 12 independent cases would
    assert "INSUFFICIENT_EVIDENCE" in row(result.out, "floor"), result
    slice_a = next(r for r in rows(result.out) if r[0] == "metadata.topic=a")
    assert slice_a[4] == "mean of 2 cluster means (6 cases) · 0 clusters missing · 0 excluded"
    slice_b = next(r for r in rows(result.out) if r[0] == "metadata.topic=b")
    assert slice_b[2] == "16.7%"  # the mean of the two cluster means 1/3 and 0
    # the viewer and the HTML export summarise the slices over the same clusters
    exported = project.run("export", run_id(result), "--html", "run.html")
    assert exported.code == 0, exported
    page = (project.root / "run.html").read_text(encoding="utf-8")
    assert "mean of 2 cluster means (6 cases) · 0 clusters missing · 0 excluded" in page


@pytest.mark.parametrize(("setting", "message"), [
    ("trials: 0", "trials must be at least 1, got 0"),
    ("cluster: metadata.nowhere", "no case has a value at metadata.nowhere"),
    ("max_cluster_size: 0\ncluster: metadata.doc", "max_cluster_size must be at least 1"),
])
def test_bad_settings_are_one_line_errors(project, setting, message):
    project.cases(clustered_cases())
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + setting + "\n")
    result = project.run("run")
    assert result.code == 2, result
    assert message in result.err and "oloproof.yaml:" in result.err
    assert project.runs() == []


def test_pass_all_k_needs_trials(project):
    project.cases(clustered_cases())
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + (CLUSTERED % "0.1").replace(
        "metric: answer_correct", "metric: answer_correct.pass_all_k"))
    result = project.run("run")
    assert result.code == 2 and "needs repeated trials" in result.err and "trials: 5" in result.err, result
    assert project.run("run", "--trials", "2").code in (0, 3)


def test_trials_and_a_sequential_run_are_refused_together(project):
    project.cases(clustered_cases())
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + CLUSTERED % "0.1")
    result = project.run("run", "--until-decided")
    assert result.code == 2 and "sets trials or cluster" in result.err, result


def test_without_trials_or_cluster_nothing_changes(project):
    project.cases([case(i, ok=i < 9) for i in range(13)])
    result = project.run("run")
    assert row(result.out, "answer_correct")[1:] == ["69.2%", "[38.5%, 91.0%]",
                                                     "9 / 13 observed · 0 missing · 0 excluded"]
    assert "Unstable" not in result.out and "Trials:" not in result.out and "Clusters" not in result.out
    header, summary, records = stored(project.root, run_id(result))
    assert "design" not in header and "trials" not in records[0] and "cluster" not in records[0]


def paired_reference(differences: list[float]) -> tuple[float, float]:
    """The paired interval on [-1, 1]: the reference betting interval of (d + 1)/2, mapped back."""
    low, high = betting_reference([(d + 1) / 2 for d in differences])
    return 2 * low - 1, 2 * high - 1


def points(low: float, high: float) -> str:
    import math

    return f"[{math.floor(1000 * low + 1e-6) / 10:+.1f}, {math.ceil(1000 * high - 1e-6) / 10:+.1f}]"


def fractions_of(records: list[dict], criterion: str) -> dict[str, float]:
    return {r["id"]: sum(t["judgments"][criterion]["status"] == "pass" for t in r["trials"]) / len(r["trials"])
            for r in records}


@pytest.mark.slow  # shares the example runs of the `flaky` fixture (about 30 seconds)
def test_compare_pairs_the_trial_means(flaky):
    root = flaky["root"]
    candidate = olo("run", "--config", "candidate.yaml", cwd=root)
    assert candidate.code == 0, candidate
    result = olo("compare", run_id(candidate), run_id(flaky["five"]), "--policy", "compare.yaml", cwd=root)
    assert result.code in (0, 1, 3), result
    cand = fractions_of(stored(root, run_id(candidate))[2], "answer_correct")
    base = fractions_of(stored(root, run_id(flaky["five"]))[2], "answer_correct")
    differences = [cand[i] - base[i] for i in cand]
    assert any(0 < abs(d) < 1 for d in differences)  # graded differences, not only -1, 0, +1
    line = next(x for x in result.out.splitlines() if x.startswith("answer_correct:"))
    mean = sum(differences) / len(differences)
    assert line == (f"answer_correct: {round(1000 * mean) / 10:+.1f} points {points(*paired_reference(differences))} "
                    f"· 26 paired · 0 missing · 0 excluded")
    assert "Pairs: cases; a case's value is its mean over its trials (5 in the candidate, 5 in the baseline)" \
        in result.out
    # the planning line scales the observed differences when the rule is undecided
    if "INSUFFICIENT_EVIDENCE" in result.out:
        assert "more paired cases would decide it, if the differences hold" in result.out


def test_compare_aggregates_paired_differences_per_cluster(project):
    project.cases(clustered_cases())
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "cluster: metadata.doc\n")
    baseline = project.run("run")
    flipped = clustered_cases()
    for c in flipped:  # the candidate fixes d2 and breaks one case of d0
        if c["metadata"]["doc"] == "d2" or c["id"] == "c000":
            c["input"]["q"] = "nope" if c["id"] == "c000" else c["expected"]["answer"]
    project.cases(flipped)
    candidate = project.run("run")
    project.write("compare.yaml", """
        version: 1
        rules:
          - {id: not-worse, metric: answer_correct, kind: non-inferiority, margin: 5.0}
    """)
    result = project.run("compare", run_id(candidate), run_id(baseline), "--policy", "compare.yaml")
    # clusters d0..d3: d0 loses one of three (-1/3), d2 gains two of three (+2/3), d1 and d3 unchanged
    differences = [-1 / 3, 0.0, 2 / 3, 0.0]
    line = next(x for x in result.out.splitlines() if x.startswith("answer_correct:"))
    assert line == (f"answer_correct: +8.3 points {points(*paired_reference(differences))} · 4 paired clusters "
                    "· 0 missing · 0 excluded"), result
    assert "Pairs: cluster means by metadata.doc" in result.out
    assert "more paired clusters would decide it, if the differences hold" in result.out


@pytest.mark.slow  # shares the example runs of the `flaky` fixture (about 30 seconds)
def test_diagnose_labels_unstable_cases_first_and_counts_recoveries_across_trials(flaky):
    root = flaky["root"]
    result = olo("diagnose", run_id(flaky["five"]), "--intervention", "gold-context", "--criterion",
                 "answer_correct", cwd=root)
    assert result.code == 0, result
    _, _, records = stored(root, run_id(flaky["five"]))
    statuses = {r["id"]: {t["judgments"]["answer_correct"]["status"] for t in r["trials"]} for r in records}
    unstable = sorted(i for i, s in statuses.items() if s == {"pass", "fail"})
    steady = sorted(i for i, s in statuses.items() if s == {"fail"})
    assert steady == ["refund-money", "sso-key"]  # ranked out of the top-1 context in every trial
    lines = result.out.splitlines()
    n = len(unstable) + len(steady)
    assert lines[0] == f"Selected: {n} failed cases with gold context (observed; no population claim)"
    assert lines[1].startswith(f"Unstable: {len(unstable)} of {n} passed in some of the run's 5 trials")
    assert f"Control: 0 of {len(steady)} passed when re-executed without the intervention" in lines
    # refund-money recovers in every trial; sso-key's gold passage is misread in some trials, so its
    # recovery does not beat the control across the trials
    assert f"Recovered under gold context: 1 of {len(steady)}" in lines
    assert f"RANKED_OUT: 1 of {n}, recovered; relevant evidence was retrieved below top-k" in lines
    assert (f"UNRESOLVED: {len(unstable)} of {n}, passed in some of the run's trials and failed in others, so it "
            "was unstable, not diagnosed") in lines
    assert (f"UNRESOLVED: 1 of {n}, passed in some trials under the intervention and in none of the control, "
            "not in all") in lines
    diagnosis = next(x.split()[1] for x in lines if x.startswith("Diagnosis "))
    shown = olo("inspect", diagnosis, cwd=root)
    assert "sso-key: UNRESOLVED, recovered_in_some_trials" in shown.out, shown
    for case_id in unstable:
        assert f"{case_id}: UNRESOLVED, unstable" in shown.out
    # the child runs executed each re-executed case five times, and stored every trial
    children = [x for x in lines if x.startswith("Child runs: ")][0]
    gold_run = children.split("gold context ")[1].split(",")[0]
    _, _, rows_ = stored(root, gold_run)
    assert sorted(r["id"] for r in rows_) == steady and all(len(r["trials"]) == 5 for r in rows_)


@pytest.mark.slow  # shares the example runs of the `flaky` fixture (about 30 seconds)
def test_the_json_document_carries_the_units_and_matches_the_schema(flaky):
    import jsonschema

    from oloproof_core.outputs import schema as shipped

    schema = shipped()
    root = flaky["root"]
    for key in ("five", "clustered"):
        result = olo("inspect", run_id(flaky[key]), "--format", "json", cwd=root)
        document = json.loads(result.out)
        jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
        units = document["units"]
        if key == "five":
            assert units["trials"] == 5 and units["cluster"] is None
            markdown = root / "five.md"
            shown = olo("run", "--markdown", str(markdown), cwd=root)
            unstable = next(x for x in shown.out.splitlines() if x.startswith("Unstable:"))
            assert f"- {unstable}" in markdown.read_text(encoding="utf-8").splitlines()
            found = {u["criterion"]: u for u in units["instability"]}
            assert found["answer_correct"]["cases"] == 26 and found["answer_correct"]["method"] == "clopper-pearson"
        else:
            assert units["cluster"] == "metadata.source" and units["clusters"]["clusters"] == 8


def test_a_suite_runs_with_trials_from_python(project, monkeypatch):
    import sys

    import oloproof

    project.cases([case(i, ok=i < 3) for i in range(4)])
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "app", raising=False)
    outcome = oloproof.run(project.root / "oloproof.yaml", trials=2)
    assert outcome.caches["execution"] == [0, 8]
    assert [len(t) for t in outcome.tally.trials] == [2, 2, 2, 2]
    assert outcome.units["instability"]["answer_correct"]["unstable"] == 0  # a deterministic system
    assert outcome.summaries["answer_correct.pass_all_k"].cells[2] == "3 / 4 observed · 0 missing · 0 excluded"


def test_trials_and_clusters_together(project):
    project.cases(clustered_cases())
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "cluster: metadata.doc\ntrials: 3\n")
    result = project.run("run")
    assert result.code == 0, result
    counts = "mean of 4 cluster means (12 cases × 3 trials) · 0 clusters missing · 0 excluded"
    assert row(result.out, "answer_correct")[3] == counts
    assert row(result.out, "answer_correct.pass_all_k")[3] == counts
    assert row(result.out, "answer_correct")[2] == outward(*betting_reference([1.0, 1.0, 1 / 3, 0.0]))
    header, summary, _ = stored(project.root, run_id(result))
    assert summary["instability"]["answer_correct"]["method"] == "betting over clusters"
    assert "Unstable: 0 of 12 cases changed verdict across 3 trials (answer_correct)" in result.out
    assert "Cache: execution 0 hit/36 miss" in result.out


def test_a_bad_trials_option_is_a_one_line_error(project):
    project.cases(clustered_cases())
    result = project.run("run", "--trials", "0")
    assert result.code == 2 and "--trials: trials must be at least 1, got 0" in result.err, result
    assert project.runs() == []

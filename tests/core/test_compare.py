"""`oloproof compare` end to end: pairing, counts and reasons, decisions, planning, ids, errors.

Runs are built through the real command line. Editing ``app.py`` between runs changes the recorded
system version and misses the execution cache, so each run really executes. The statistics of the
paired interval itself are tested in ``test_stats.py``; here a short seeded simulation checks the
coverage of the interval exactly as compare computes it.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import CONFIG, Project, case, olo
from oloproof_core.decisions.compare import Paired

RUN = re.compile(r"^Run (run_[0-9A-HJKMNP-TV-Z]{26}) ", re.M)
HEADER = r"Comparison sha256:[0-9a-f]{{64}} of {cand} against {base} · {n} paired cases"

APP = '''
from oloproof import system

BROKEN = {broken!r}  # questions answered wrongly
CRASH = {crash!r}  # questions the system fails on (the case is missing)
# variant {label}

@system(name="echo", version="1")
def run(input):
    if input["q"] in CRASH:
        raise RuntimeError("boom")
    return {{"answer": "nope" if input["q"] in BROKEN else input["q"]}}
'''


def questions(indices) -> list[str]:
    return sorted(f"answer {i}" for i in indices)


def run_system(p: Project, label: str, broken=(), crash=()) -> str:
    """Write app.py answering cases ``broken`` wrongly and crashing on ``crash``; run; the run id."""
    p.write("app.py", APP.format(broken=questions(broken), crash=questions(crash), label=label))
    result = p.run("run")
    assert result.code == 0, result  # no policy in these projects: a run always exits 0
    return RUN.search(result.out).group(1)


BLOCK_ALL = "[FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]"
CASE_SENSITIVE = CONFIG.replace("expected_field: answer}", "expected_field: answer, case_sensitive: true}")


def policy(p: Project, *rules: str, name: str = "compare.yaml", block_on: str = BLOCK_ALL) -> str:
    body = "".join(f"  - {{{r}}}\n" for r in rules)
    p.write(name, f"version: 1\nconfidence_level: 0.95\nblock_on: {block_on}\nrules:\n{body}")
    return name


def compare(p: Project, cand: str, base: str, policy_file: str = "compare.yaml", *extra: str):
    return p.run("compare", cand, base, "--policy", policy_file, *extra)


def decision(result, rule: str) -> list[str]:
    """The decision line of ``rule``, split into its columns."""
    for line in result.out.splitlines():
        if line.startswith(f"  {rule}  "):
            return line.strip().split("  ")
    raise AssertionError(f"no decision line for {rule!r} in\n{result.out}")


def gate_line(result) -> str:
    """The gate line (the cases that changed verdict follow it)."""
    return next(line for line in result.out.splitlines() if line.startswith("Gate: "))


def changed(result) -> list[str]:
    """The lines from ``Changed verdicts:`` to the end."""
    lines = result.out.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("Changed verdicts:")):]


def planning(result, rule: str) -> str | None:
    """The indented planning line under ``rule``'s decision, if any."""
    lines = result.out.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(f"  {rule}  "))
    following = lines[index + 1] if index + 1 < len(lines) else ""
    return following.strip() if following.startswith("    ") else None


@pytest.fixture(scope="module")
def ten(tmp_path_factory) -> dict:
    """Ten cases, a slice on metadata.topic, and four versions of the system.

    bad: cases 0-7 answered wrongly; good: none; one: case 0 wrongly; other: case 1 wrongly.
    good against bad has 8 fail→pass pairs; one against good 1 pass→fail; one against other b = c = 1.
    """
    p = Project(tmp_path_factory.mktemp("ten"))
    p.write("oloproof.yaml", CONFIG + "slices: [metadata.topic]\nmin_slice_support: 5\n")
    p.cases([case(i) for i in range(10)])
    runs = {name: run_system(p, name, broken) for name, broken in
            (("bad", range(8)), ("good", ()), ("one", [0]), ("other", [1]))}
    return {"p": p, **runs}


@pytest.fixture(scope="module")
def twenty(tmp_path_factory) -> dict:
    """Twenty labelled cases and one without an expected answer (excluded: no_expected_value).

    same, same2: every case passes (different code, so both really execute);
    crash: like same but case 5 errors; crash2: the same crash in other code.
    """
    p = Project(tmp_path_factory.mktemp("twenty"))
    p.write("oloproof.yaml", CONFIG + "slices: [metadata.topic]\nmin_slice_support: 10\n")
    unlabelled = {**case(20), "expected": {}}
    p.cases([case(i) for i in range(20)] + [unlabelled])
    runs = {name: run_system(p, name, (), crash) for name, crash in
            (("same", ()), ("same2", ()), ("crash", [5]), ("crash2", [5]))}
    return {"p": p, **runs}


# --- the documented comparison (path A) ----------------------------------------------------------

PATH_A = """\
answer_correct: +6.7 points [-26.5, +40.8] · 15 paired · 0 missing · 0 excluded
hit_rate_at_2: +7.7 points [-29.8, +45.5] · 13 paired · 0 missing · 2 excluded
  excluded 2: no_relevance_labels
recall_at_2: +7.7 points [-29.8, +45.5] · 13 paired · 0 missing · 2 excluded
  excluded 2: no_relevance_labels
citations_valid: +6.7 points [-26.5, +40.8] · 15 paired · 0 missing · 0 excluded
20 exploratory slice differences not shown; add --slices to list them
Decisions
  answers-not-worse  answer_correct  non-inferiority, margin 5.0 points  INSUFFICIENT_EVIDENCE  interval_overlaps_margin
    about 38 more paired cases would decide it, if the difference holds (53 in total at 7% discordance)
  citations-not-worse  citations_valid  non-inferiority, margin 2.0 points  INSUFFICIENT_EVIDENCE  interval_overlaps_margin
    about 68 more paired cases would decide it, if the difference holds (83 in total at 7% discordance)
Gate: BLOCK (exit 3)
"""
# after the gate line (the documented layout above ends there): the one case the change fixed
PATH_A_CHANGED = """\
Changed verdicts: 4 on 1 case (4 fixed, 0 broken)
  money_back  fixed: answer_correct, hit_rate_at_2, recall_at_2, citations_valid
"""


@pytest.fixture(scope="module")
def path_a(tmp_path_factory) -> dict:
    """The tutorial's path A: init blackbox_rag, run, EXPAND_QUERY = True, run."""
    root = tmp_path_factory.mktemp("path_a")
    assert olo("init", "--example", "blackbox_rag", "my-rag", cwd=root).code == 0
    p = Project(root / "my-rag")
    base = RUN.search(p.run("run").out).group(1)
    app = p.root / "app.py"
    text = app.read_text(encoding="utf-8")
    assert "EXPAND_QUERY = False" in text
    app.write_text(text.replace("EXPAND_QUERY = False", "EXPAND_QUERY = True", 1), encoding="utf-8")
    cand = RUN.search(p.run("run").out).group(1)
    return {"p": p, "cand": cand, "base": base}


@pytest.mark.slow
def test_path_a_prints_the_documented_comparison(path_a):
    p, cand, base = path_a["p"], path_a["cand"], path_a["base"]
    result = compare(p, cand, base)
    assert result.code == 3, result
    header, *body = result.out.splitlines()
    assert re.fullmatch(HEADER.format(cand=cand, base=base, n=15), header), header
    assert "\n".join(body) + "\n" == PATH_A + PATH_A_CHANGED
    assert result.err == ""


@pytest.mark.slow
def test_path_a_slices_list_one_line_per_slice_and_metric(path_a):
    p, cand, base = path_a["p"], path_a["cand"], path_a["base"]
    result = compare(p, cand, base, "compare.yaml", "--slices")
    assert result.code == 3
    lines = result.out.splitlines()
    start = lines.index("Exploratory slice differences (never gate)")
    listed = lines[start + 1:lines.index("Decisions")]
    assert len(listed) == 20  # five topics × four metrics, as the count line says
    assert ("  metadata.topic=billing · answer_correct: +25.0 points [-65.9, +88.1] · 4 paired · 0 missing · 0 excluded"
            in listed)
    # below min_slice_support (4) the difference is shown without an interval
    assert "  metadata.topic=account · answer_correct: +0.0 points · 3 paired · 0 missing · 0 excluded" in listed
    assert not any("exploratory slice differences not shown" in line for line in lines)
    # the decisions and the gate are the same with or without the slice lines: slices never gate
    decisions = (PATH_A + PATH_A_CHANGED).splitlines()
    assert lines[lines.index("Decisions"):] == decisions[decisions.index("Decisions"):]


@pytest.mark.slow
def test_path_a_id_is_stable_and_inspect_shows_the_comparison(path_a):
    p, cand, base = path_a["p"], path_a["cand"], path_a["base"]
    first, again = compare(p, cand, base), compare(p, cand, base)
    listed = compare(p, cand, base, "compare.yaml", "--slices", "--cases")
    object_id = first.out.split()[1]
    assert object_id == again.out.split()[1] == listed.out.split()[1]  # --slices and --cases are display only
    shown = p.run("inspect", object_id)
    assert shown.code == 0, shown
    assert shown.out == listed.out  # the stored comparison, slice lines and changed cases listed
    assert p.run("inspect", object_id[:20]).out == listed.out  # an unambiguous prefix is enough
    # a different policy (a rule's margin) is a different comparison
    text = (p.root / "compare.yaml").read_text().replace("margin: 2.0", "margin: 3.0")
    p.write("other.yaml", text)
    other = compare(p, cand, base, "other.yaml")
    assert other.out.split()[1] != object_id
    # the same policy content under another file name is the same comparison
    shutil.copy(p.root / "compare.yaml", p.root / "copy.yaml")
    assert compare(p, cand, base, "copy.yaml").out.split()[1] == object_id
    # swapping candidate and baseline is another comparison, with the difference negated
    swapped = compare(p, base, cand)
    assert swapped.out.split()[1] != object_id
    assert "answer_correct: -6.7 points [-40.8, +26.5] · 15 paired · 0 missing · 0 excluded" in swapped.out


# --- pairing ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_disjoint_runs_are_refused(project):
    project.cases([case(i) for i in range(4)])
    base = run_system(project, "a")
    project.cases([case(i) for i in range(100, 104)])
    cand = run_system(project, "b")
    policy(project, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0")
    result = compare(project, cand, base)
    assert result.code == 2, result
    assert result.out == ""
    assert f"error: {cand} and {base} share no case ids, so no case can be paired" in result.err
    assert "fix: compare two runs of the same suite" in result.err
    assert "Traceback" not in result.err


@pytest.mark.slow
def test_partially_overlapping_runs_pair_the_shared_cases(project):
    project.cases([case(i, ok=i != 7) for i in range(10)])  # c000..c009, c007 fails in the baseline
    base = run_system(project, "a")
    project.cases([case(i) for i in range(5, 17)])  # c005..c016: five shared... and c007 now passes
    cand = run_system(project, "b")
    policy(project, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0")
    result = compare(project, cand, base)
    lines = result.out.splitlines()
    assert re.fullmatch(HEADER.format(cand=cand, base=base, n=5), lines[0]), lines[0]
    assert lines[1] == f"Unpaired: 7 only in {cand}, 5 only in {base}"
    assert lines[2] == "answer_correct: +20.0 points [-58.3, +80.9] · 5 paired · 0 missing · 0 excluded"
    assert result.code == 3


@pytest.mark.slow
def test_runs_of_the_same_cases_print_no_unpaired_line(ten):
    p = ten["p"]
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0")
    result = compare(p, ten["good"], ten["bad"])
    assert not any(line.startswith("Unpaired:") for line in result.out.splitlines())
    assert "answer_correct: +80.0 points [+3.4, +99.3] · 10 paired · 0 missing · 0 excluded" in result.out


@pytest.mark.slow
def test_excluded_and_missing_pairs_are_counted_with_their_reasons(twenty):
    p = twenty["p"]
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0")
    expected = {
        (twenty["crash"], twenty["same"]): "  missing 1: error: RuntimeError: boom (candidate run)",
        (twenty["same"], twenty["crash"]): "  missing 1: error: RuntimeError: boom (baseline run)",
        (twenty["crash2"], twenty["crash"]): "  missing 1: error: RuntimeError: boom (both runs)",
    }
    for (cand, base), reason in expected.items():
        lines = compare(p, cand, base).out.splitlines()
        assert lines[1:4] == [
            "answer_correct: +0.0 points [-24.6, +24.6] · 19 paired · 1 missing · 1 excluded",
            "  excluded 1: no_expected_value",
            reason,
        ], lines
        assert lines[0].endswith(" · 21 paired cases")
    unchanged = compare(p, twenty["same2"], twenty["same"])
    assert unchanged.out.splitlines()[1:3] == [
        "answer_correct: +0.0 points [-23.6, +23.6] · 20 paired · 0 missing · 1 excluded",
        "  excluded 1: no_expected_value"]
    assert changed(unchanged) == ["Changed verdicts: none (no paired case passes or fails differently)"]
    # a case that passed and now errored counts as broken; one that errored and now passes as fixed
    assert changed(compare(p, twenty["crash"], twenty["same"])) == [
        "Changed verdicts: 1 on 1 case (0 fixed, 1 broken)", "  c005  broken: answer_correct"]
    assert changed(compare(p, twenty["same"], twenty["crash"])) == [
        "Changed verdicts: 1 on 1 case (1 fixed, 0 broken)", "  c005  fixed: answer_correct"]


@pytest.mark.slow
def test_a_missing_pair_never_helps_a_pass(twenty):
    # 19 unchanged pairs: [-24.6, +24.6] clears a 28-point margin, but with the missing pair at
    # the worst difference (-1) the lower bound is -32.4, so the rule cannot pass.
    p = twenty["p"]
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 28.0")
    complete = compare(p, twenty["same2"], twenty["same"])
    assert decision(complete, "ni")[3:] == ["PASS", "interval_above_margin"]
    for cand, base in ((twenty["crash"], twenty["same"]), (twenty["same"], twenty["crash"])):
        result = compare(p, cand, base)
        assert decision(result, "ni")[3:] == ["INSUFFICIENT_EVIDENCE", "missing_cases_could_change_it"]
        assert planning(result, "ni") is None
        assert result.code == 3


@pytest.mark.slow
def test_a_missing_case_counts_against_a_floor(twenty):
    # Floor on the candidate alone: 20/20 (the excluded case aside) has Clopper-Pearson lower
    # bound 83.2%; with the crashed case counted as a failure, 19/20 gives 75.1%.
    p = twenty["p"]
    policy(p, "id: floor, metric: answer_correct, kind: floor, min: 0.80")
    assert decision(compare(p, twenty["same"], twenty["crash"]), "floor")[3:] == ["PASS", "interval_within_threshold"]
    crashed = compare(p, twenty["crash"], twenty["same"])
    assert decision(crashed, "floor")[3:] == ["INSUFFICIENT_EVIDENCE", "missing_cases_could_change_it"]
    assert crashed.code == 3


@pytest.mark.slow
def test_a_floor_reads_every_case_of_the_candidate(project):
    # The candidate has cases the baseline lacks; the floor reads all of them, not only the pairs.
    project.cases([case(i) for i in range(3)])
    base = run_system(project, "a")
    project.cases([case(i) for i in range(30)])
    cand = run_system(project, "b")
    policy(project, "id: floor, metric: answer_correct, kind: floor, min: 0.85")
    result = compare(project, cand, base)
    assert decision(result, "floor")[2:] == ["floor, min 85.0%", "PASS", "interval_within_threshold"]
    assert result.code == 0  # 30/30: [88.4%, 100%]; the three pairs alone could not clear 85%


# --- evaluators that differ ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_criterion_defined_differently_is_refused_or_needs_manual_review(project):
    project.cases([case(i) for i in range(6)])
    base = run_system(project, "a")
    project.write("oloproof.yaml", CASE_SENSITIVE)
    cand = run_system(project, "b")
    policy(project, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0",
           "id: floor, metric: answer_correct, kind: floor, min: 0.3")
    refused = compare(project, cand, base)
    assert refused.code == 2, refused
    assert refused.out == ""
    assert ("error: criterion 'answer_correct' is defined differently in the two runs "
            "(same name, different evaluator config)") in refused.err
    assert "--allow-different-evaluators" in refused.err
    allowed = compare(project, cand, base, "compare.yaml", "--allow-different-evaluators")
    assert allowed.code == 3, allowed
    assert "  evaluator config differs between the runs" in allowed.out.splitlines()
    assert decision(allowed, "ni")[3:] == ["MANUAL_REVIEW", "evaluator_changed"]
    assert planning(allowed, "ni") is None
    # a floor reads the candidate alone, so the baseline's evaluator does not matter to it
    assert decision(allowed, "floor")[3:] == ["PASS", "interval_within_threshold"]
    assert "Gate: BLOCK (exit 3)" in allowed.out


@pytest.mark.slow
def test_a_criterion_in_one_run_only_is_named_and_cannot_be_decided(project):
    project.cases([case(i) for i in range(4)])
    base = run_system(project, "a")
    project.write("oloproof.yaml", CONFIG + "  - {type: exact, criterion: answer_exact, field: answer}\n")
    cand = run_system(project, "b")
    policy(project, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0")
    result = compare(project, cand, base)
    assert f"Not compared: answer_exact only in {cand}" in result.out.splitlines()
    policy(project, "id: ni, metric: answer_exact, kind: non-inferiority, margin: 5.0")
    refused = compare(project, cand, base)
    assert refused.code == 2
    assert ("compare.yaml:5:5: $.rules[0]: rule 'ni' names metric 'answer_exact', "
            "which the two runs do not share") in refused.err


# --- decisions, verdicts and the gate -----------------------------------------------------------


@pytest.mark.slow
def test_every_decision_kind_passes_when_the_candidate_is_clearly_better(ten):
    p = ten["p"]
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0",
           "id: sup, metric: answer_correct, kind: superiority, margin: 0.0",
           "id: floor, metric: answer_correct, kind: floor, min: 0.6")
    result = compare(p, ten["good"], ten["bad"])  # 8 fail→pass of 10: [+3.4, +99.3]
    assert decision(result, "ni") == ["ni", "answer_correct", "non-inferiority, margin 5.0 points", "PASS",
                                      "interval_above_margin"]
    assert decision(result, "sup")[2:] == ["superiority, margin 0.0 points", "PASS", "interval_above_margin"]
    assert decision(result, "floor")[2:] == ["floor, min 60.0%", "PASS", "interval_within_threshold"]
    assert all(planning(result, rule) is None for rule in ("ni", "sup", "floor"))
    assert gate_line(result) == "Gate: PASS (exit 0)"
    assert result.code == 0
    # eight cases fixed: the first five listed, the rest counted; --cases lists all eight
    listed = changed(result)
    assert listed[0] == "Changed verdicts: 8 on 8 cases (8 fixed, 0 broken)"
    assert listed[1:6] == [f"  c00{i}  fixed: answer_correct" for i in range(5)]
    assert listed[6:] == ["  … and 3 more; add --cases to list them all"]
    every = changed(compare(p, ten["good"], ten["bad"], "compare.yaml", "--cases"))
    assert len(every) == 9 and all(line.endswith("  fixed: answer_correct") for line in every[1:])
    # the other way round, the same cases are broken
    assert changed(compare(p, ten["bad"], ten["good"]))[0] == "Changed verdicts: 8 on 8 cases (0 fixed, 8 broken)"


@pytest.mark.slow
def test_every_decision_kind_fails_when_the_candidate_is_clearly_worse(ten):
    p = ten["p"]
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 2.0",
           "id: sup, metric: answer_correct, kind: superiority, margin: 0.0",
           "id: floor, metric: answer_correct, kind: floor, min: 0.9")
    result = compare(p, ten["bad"], ten["good"])  # 8 pass→fail of 10: [-99.3, -3.4]
    assert "answer_correct: -80.0 points [-99.3, -3.4] · 10 paired · 0 missing · 0 excluded" in result.out
    assert decision(result, "ni")[3:] == ["FAIL", "interval_below_margin"]
    assert decision(result, "sup")[3:] == ["FAIL", "interval_below_margin"]
    assert decision(result, "floor")[3:] == ["FAIL", "interval_below_minimum"]  # 2/10: [2.5%, 55.7%]
    assert gate_line(result) == "Gate: BLOCK (exit 1)"
    assert result.code == 1


@pytest.mark.slow
def test_superiority_fails_when_the_interval_rules_out_the_margin(twenty):
    p = twenty["p"]
    policy(p, "id: sup, metric: answer_correct, kind: superiority, margin: 30.0",
           "id: undecided, metric: answer_correct, kind: superiority, margin: 10.0")
    result = compare(p, twenty["same2"], twenty["same"])  # no change over 20 pairs: [-23.6, +23.6]
    assert decision(result, "sup")[2:] == ["superiority, margin 30.0 points", "FAIL", "interval_below_margin"]
    assert decision(result, "undecided")[3:] == ["INSUFFICIENT_EVIDENCE", "interval_overlaps_margin"]
    assert planning(result, "undecided") is None  # no discordant pair: nothing to scale
    assert result.code == 1


@pytest.mark.slow
def test_insufficient_evidence_blocks_with_exit_3_unless_policy_does_not_block_on_it(ten):
    p = ten["p"]
    rule = "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0"
    policy(p, rule, "id: floor, metric: answer_correct, kind: floor, min: 0.8")
    result = compare(p, ten["one"], ten["good"])  # 1 pass→fail of 10: [-54.8, +36.6]
    assert decision(result, "ni")[3:] == ["INSUFFICIENT_EVIDENCE", "interval_overlaps_margin"]
    assert decision(result, "floor")[3:] == ["INSUFFICIENT_EVIDENCE", "interval_overlaps_threshold"]
    assert gate_line(result) == "Gate: BLOCK (exit 3)"
    assert result.code == 3
    policy(p, rule, name="lenient.yaml", block_on="[FAIL]")
    lenient = compare(p, ten["one"], ten["good"], "lenient.yaml")
    assert decision(lenient, "ni")[3:] == ["INSUFFICIENT_EVIDENCE", "interval_overlaps_margin"]
    assert gate_line(lenient) == "Gate: PASS (exit 0)"
    assert lenient.code == 0


@pytest.mark.slow
def test_manual_review_blocks_with_exit_3_and_fail_wins_with_exit_1(project):
    project.cases([case(i) for i in range(10)])
    base = run_system(project, "a")
    project.write("oloproof.yaml", CASE_SENSITIVE)
    cand = run_system(project, "b", broken=range(10))
    policy(project, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0", name="review.yaml")
    review = compare(project, cand, base, "review.yaml", "--allow-different-evaluators")
    assert decision(review, "ni")[3:] == ["MANUAL_REVIEW", "evaluator_changed"]
    assert review.code == 3
    policy(project, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0",
           "id: floor, metric: answer_correct, kind: floor, min: 0.5", name="both.yaml")
    both = compare(project, cand, base, "both.yaml", "--allow-different-evaluators")
    assert decision(both, "floor")[3:] == ["FAIL", "interval_below_minimum"]
    assert gate_line(both) == "Gate: BLOCK (exit 1)"
    assert both.code == 1


# --- planning lines ------------------------------------------------------------------------------


def test_planning_line_when_undecided_with_discordant_pairs(ten):
    p = ten["p"]
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0",
           "id: sup, metric: answer_correct, kind: superiority, margin: 0.0")
    result = compare(p, ten["good"], ten["one"])  # 1 fail→pass of 10
    assert "answer_correct: +10.0 points [-36.6, +54.8] · 10 paired · 0 missing · 0 excluded" in result.out
    assert decision(result, "ni")[3:] == ["INSUFFICIENT_EVIDENCE", "interval_overlaps_margin"]
    assert planning(result, "ni") == ("about 35 more paired cases would decide it, if the difference holds "
                                      "(45 in total at 10% discordance)")
    assert planning(result, "sup") == ("about 65 more paired cases would decide it, if the difference holds "
                                       "(75 in total at 10% discordance)")


def test_no_planning_line_at_zero_discordance(ten, twenty):
    policy(ten["p"], "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0")
    same = compare(ten["p"], ten["good"], ten["good"])
    assert "answer_correct: +0.0 points [-41.0, +41.0] · 10 paired · 0 missing · 0 excluded" in same.out
    assert decision(same, "ni")[3:] == ["INSUFFICIENT_EVIDENCE", "interval_overlaps_margin"]
    assert planning(same, "ni") is None
    assert "paired cases would decide it" not in same.out


def test_planning_says_when_nothing_within_the_search_bound_decides(ten):
    # b = c = 1: the difference is zero and a zero margin sits inside every interval, at any size.
    p = ten["p"]
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 0.0")
    result = compare(p, ten["other"], ten["one"])
    assert "answer_correct: +0.0 points [-51.1, +51.1] · 10 paired · 0 missing · 0 excluded" in result.out
    assert decision(result, "ni")[3:] == ["INSUFFICIENT_EVIDENCE", "interval_overlaps_margin"]
    assert planning(result, "ni") == ("no total up to 100,000 paired cases would decide it, "
                                      "if the difference holds (20% discordance)")
    assert result.code == 3


# --- slices ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_slices_count_line_and_listing(twenty):
    p = twenty["p"]
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0")
    counted = compare(p, twenty["crash"], twenty["same"])
    assert "2 exploratory slice differences not shown; add --slices to list them" in counted.out.splitlines()
    listed = compare(p, twenty["crash"], twenty["same"], "compare.yaml", "--slices").out.splitlines()
    start = listed.index("Exploratory slice differences (never gate)")
    assert listed[start + 1:listed.index("Decisions")] == [
        # even: c000..c018 (the unlabelled c020 is excluded) — ten pairs, at min_slice_support
        "  metadata.topic=even · answer_correct: +0.0 points [-41.0, +41.0] · 10 paired · 0 missing · 1 excluded",
        # odd: c005 crashed, nine pairs — below min_slice_support, so no interval
        "  metadata.topic=odd · answer_correct: +0.0 points · 9 paired · 1 missing · 0 excluded",
    ]
    assert counted.out.split()[1] == listed[0].split()[1]


# --- the compare policy ------------------------------------------------------------------------------

BAD_POLICIES = [
    ("kind: bogus, margin: 5.0", "compare.yaml:5:37: $.rules[0].kind: rule 'r' has kind 'bogus', which compare "
     "does not decide; fix: use one of: non-inferiority, superiority, floor"),
    ("kind: observed_count, max_failures: 0", "compare.yaml:5:37: $.rules[0].kind: rule 'r' has kind "
     "'observed_count', which compare does not decide; fix: use one of: non-inferiority, superiority, floor"),
    ("margin: 5.0", "compare.yaml:5:5: $.rules[0]: a compare rule needs a kind; fix: add `kind:` with one of: "
     "non-inferiority, superiority, floor"),
    ("kind: floor", "compare.yaml:5:5: $.rules[0]: rule 'r' of kind floor needs min; fix: add `min: 0.70` "
     "(a fraction: 70%)"),
    ("kind: floor, min: 70", "compare.yaml:5:50: $.rules[0].min: min must be a fraction between 0 and 1, got 70.0; "
     "fix: write min: 0.70 for 70%"),
    ("kind: non-inferiority, margin: 150.0", "compare.yaml:5:60: $.rules[0].margin: margin is in points, at least "
     "0 and below 100, got 150.0; fix: write margin: 5.0 for five points"),
    ("kind: superiority, margin: -100.0", "compare.yaml:5:56: $.rules[0].margin: margin is in points, at least "
     "0 and below 100, got -100.0; fix: write margin: 5.0 for five points"),
    ("kind: non-inferiority, min: 0.7", "compare.yaml:5:60: $.rules[0].min: rule 'r' of kind non-inferiority "
     "does not read min; fix: remove min; a non-inferiority rule takes margin"),
    ("kind: floor, min: 0.7, margin: 5.0", "compare.yaml:5:60: $.rules[0].margin: rule 'r' of kind floor does "
     "not read margin; fix: remove margin; a floor rule takes min"),
]


@pytest.mark.parametrize(("rule", "message"), BAD_POLICIES, ids=[r for r, _ in BAD_POLICIES])
def test_a_bad_compare_policy_is_reported_with_file_and_line(ten, rule, message):
    p = ten["p"]
    name = policy(p, f"id: r, metric: answer_correct, {rule}", name="bad.yaml")
    result = compare(p, ten["good"], ten["bad"], name)
    assert result.code == 2, result
    assert result.out == ""
    assert result.err.strip() == "error: " + message.replace("compare.yaml", "bad.yaml")


def test_a_missing_policy_file_is_a_usage_error(ten):
    result = compare(ten["p"], ten["good"], ten["bad"], "nowhere.yaml")
    assert result.code == 2
    assert "no such file nowhere.yaml" in result.err


# --- coverage of the paired interval, as compare computes it ---------------------------------------

CONFIDENCE = 0.95


def paired_counts(b: int, c: int, n: int) -> Paired:
    """n pairs with b pass→fail, c fail→pass and the rest unchanged."""
    same = n - b - c
    return Paired(criterion="x", candidate=[0.0] * b + [1.0] * c + [1.0] * same,
                  baseline=[1.0] * b + [0.0] * c + [1.0] * same, missing={}, excluded={})


def wald(b: int, c: int, n: int) -> tuple[float, float]:
    """The classical Wald interval for a difference of paired proportions (for contrast)."""
    d = (c - b) / n
    half = 1.959963984540054 * math.sqrt(max((b + c) / n - d * d, 0.0) / n)
    return d - half, d + half


def simulate(interval, n: int, worse: float, better: float, replicates: int, seed) -> float:
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, [worse, better, 1 - worse - better], replicates)
    table, truth, covered = {}, better - worse, 0
    for b, c, _ in draws.tolist():
        if (b, c) not in table:
            low, high = interval(b, c, n)
            table[b, c] = low <= truth <= high
        covered += table[b, c]
    return covered / replicates


@pytest.mark.parametrize(("n", "worse", "better"), [(10, 0.05, 0.15), (15, 0.05, 0.10), (40, 0.10, 0.10),
                                                    (100, 0.02, 0.08), (100, 0.30, 0.10)])
def test_paired_interval_covers_at_least_the_nominal_level(n, worse, better):
    replicates = 3000
    tolerance = 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / replicates)
    coverage = simulate(lambda b, c, n: paired_counts(b, c, n).interval(CONFIDENCE)[1:], n, worse, better,
                        replicates, seed=[n, int(100 * worse), int(100 * better)])
    assert coverage >= CONFIDENCE - tolerance


def test_the_simulation_detects_under_coverage():
    # The Wald interval collapses to a point when no pair is discordant (P = 0.85^15 here), so
    # it under-covers at small n; the same simulation must catch that.
    replicates = 3000
    tolerance = 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / replicates)
    assert simulate(wald, 15, 0.05, 0.10, replicates, seed=1) < CONFIDENCE - tolerance


def test_docs_name_every_verdict_reason_and_exit_code():
    text = (Path(__file__).resolve().parents[2] / "docs" / "compare.md").read_text(encoding="utf-8")
    for word in ("interval_above_margin", "interval_below_margin", "interval_overlaps_margin",
                 "missing_cases_could_change_it", "no_paired_cases", "evaluator_changed",
                 "interval_within_threshold", "interval_below_minimum", "interval_overlaps_threshold",
                 "--allow-different-evaluators", "Unpaired:", "Gate: BLOCK (exit 3)", "sha256:"):
        assert word in text, word

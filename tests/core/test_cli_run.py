"""`oloproof run` end to end: output layout, gate and exit codes, caches, store, ordering."""

from __future__ import annotations

import json
import re

import pytest
from conftest import case, olo

POLICY = """
policy:
  version: 1
  confidence_level: 0.95
  block_on: [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]
  rules:
    - {id: floor, metric: answer_correct, min: %s}
"""


def rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in text.splitlines()
            if line.startswith("│")]


def test_run_prints_the_documented_layout_and_stores_the_run(project):
    project.cases([case(i, ok=i < 9) for i in range(13)])
    result = project.run("run")
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert re.fullmatch(r"Run run_[0-9A-HJKMNP-TV-Z]{26} \[UNGATED/COMPLETE\]", lines[0])
    assert ["answer_correct", "69.2%", "[38.5%, 91.0%]", "9 / 13 observed · 0 missing · 0 excluded"] in rows(result.out)
    assert "Cache: execution 0 hit/13 miss; judgment 0 hit/13 miss" in lines
    assert project.runs() == [lines[0].split()[1]]



@pytest.mark.slow
def test_second_run_is_served_from_both_caches(project):
    project.cache_judgments()
    project.cases([case(i) for i in range(5)])
    assert project.run("run").code == 0
    again = project.run("run")
    assert "Cache: execution 5 hit/0 miss; judgment 5 hit/0 miss" in again.out
    assert len(project.runs()) == 2


@pytest.mark.slow
def test_no_cache_executes_and_judges_again(project):
    project.cache_judgments()
    project.cases([case(i) for i in range(3)])
    assert project.run("run").code == 0
    assert "Cache: execution 0 hit/3 miss; judgment 0 hit/3 miss" in project.run("run", "--no-cache").out
    assert "Cache: execution 3 hit/0 miss; judgment 3 hit/0 miss" in project.run("run").out


@pytest.mark.slow
def test_editing_the_system_code_misses_the_execution_cache(project):
    project.cache_judgments()
    project.cases([case(i) for i in range(3)])
    first = project.run("run")
    project.write("app.py", (project.root / "app.py").read_text() + "\nCHANGED = True\n")
    second = project.run("run")
    assert "Cache: execution 0 hit/3 miss; judgment 3 hit/0 miss" in second.out, second
    ids = [r.out.splitlines()[0].split()[1] for r in (first, second)]
    shown = [olo("inspect", i, cwd=project.root).out for i in ids]
    assert shown[0].splitlines()[1] != shown[1].splitlines()[1]  # the recorded system version changed


def test_changing_an_evaluator_misses_only_the_judgment_cache(project):
    project.cache_judgments()
    project.cases([case(i) for i in range(4)])
    assert "Cache: execution 4 hit/0 miss; judgment 4 hit/0 miss" in [project.run("run") for _ in range(2)][1].out
    text = (project.root / "oloproof.yaml").read_text().replace("expected_field: answer, cache: true}",
                                                                 "expected_field: answer, case_sensitive: true, cache: true}")
    project.write("oloproof.yaml", text)
    assert "Cache: execution 4 hit/0 miss; judgment 0 hit/4 miss" in project.run("run").out


@pytest.mark.slow
def test_gate_pass_fail_and_insufficient_evidence_exit_codes(project):
    project.cases([case(i, ok=i < 11) for i in range(15)])  # 11/15: [44.8%, 92.3%]
    base = (project.root / "oloproof.yaml").read_text()
    for minimum, verdict, reason, code, gate in (
        ("0.40", "PASS", "interval_within_threshold", 0, "PASS"),
        ("0.95", "FAIL", "interval_below_minimum", 1, "BLOCK"),
        ("0.70", "INSUFFICIENT_EVIDENCE", "interval_overlaps_threshold", 3, "BLOCK"),
    ):
        project.write("oloproof.yaml", base + POLICY % minimum)
        result = project.run("run")
        assert result.code == code, result
        assert f"Gate: {gate} (exit {code})" in result.out
        assert ["floor", "answer_correct", verdict, reason] in rows(result.out)
        assert "[DECIDED/COMPLETE]" in result.out.splitlines()[0]


def test_observed_count_rule(project):
    project.cases([case(i, ok=i != 3) for i in range(6)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + """
policy:
  version: 1
  rules:
    - {id: zero, metric: answer_correct, kind: observed_count, max_failures: 0}
    - {id: one, metric: answer_correct, kind: observed_count, max_failures: 1}
""")
    result = project.run("run")
    assert result.code == 1
    assert ["zero", "answer_correct", "FAIL", "observed_failures_exceed_limit"] in rows(result.out)
    assert ["one", "answer_correct", "PASS", "observed_failures_within_limit"] in rows(result.out)


@pytest.mark.slow
def test_a_failing_case_is_missing_and_never_helps_a_rule_pass(project):
    # 30 passes and 1 crash: the observed interval [88.4%, 100%] clears a floor of 0.86, but with
    # the crash counted as a failure (30/31: lower bound 83.3%) it does not, so the rule cannot pass.
    rows_ = [case(i) for i in range(30)] + [case(99, boom=True)]
    project.cases(rows_)
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + POLICY % "0.86"
                  + "    - {id: count, metric: answer_correct, kind: observed_count, max_failures: 0}\n")
    result = project.run("run")
    assert ["answer_correct", "100.0%", "[88.4%, 100.0%]", "30 / 30 observed · 1 missing · 0 excluded"] in rows(result.out)
    assert ["floor", "answer_correct", "INSUFFICIENT_EVIDENCE", "missing_cases_could_change_it"] in rows(result.out)
    assert ["count", "answer_correct", "INSUFFICIENT_EVIDENCE", "missing_cases_could_exceed_limit"] in rows(result.out)
    assert result.code == 3
    failures = project.run("inspect", result.out.split()[1], "--failures")
    assert "1 of 31 cases failed, errored or did not finish" in failures.out
    assert "  missing: error: RuntimeError: boom" in failures.out


@pytest.mark.slow
def test_results_are_in_case_order_whatever_the_concurrency(project):
    project.write("app.py", """
        import random, time
        from oloproof import system

        @system(name="jitter", version="1")
        def run(input):
            time.sleep(random.random() / 200)
            return {"answer": input["q"]}
    """)
    project.cases([case(i, ok=i % 3 != 0) for i in range(40)])
    outputs = []
    for concurrency in (1, 16):
        text = (project.root / "oloproof.yaml").read_text().split("concurrency")[0]
        project.write("oloproof.yaml", text.rstrip() + f"\nconcurrency: {concurrency}\n")
        run_id = project.run("run").out.split()[1]
        project.run("export", run_id)
        bundle = (project.root / ".oloproof" / "bundles" / run_id / "cases.jsonl").read_text().splitlines()
        outputs.append([(json.loads(x)["id"], json.loads(x)["judgments"]) for x in bundle])
        # the second configuration must execute again, not read the first one's cache
        (project.root / "app.py").write_text((project.root / "app.py").read_text() + "\n# changed\n")
    assert outputs[0] == outputs[1]
    assert [i for i, _ in outputs[0]] == [f"c{i:03d}" for i in range(40)]


def test_slices_table_and_min_slice_support(project):
    project.cases([case(i, ok=i % 4 != 0) for i in range(12)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text()
                  + "slices: [metadata.topic]\nmin_slice_support: 7\n")
    result = project.run("run")
    table = rows(result.out)
    assert ["metadata.topic=even", "answer_correct", "50.0%", "—", "3 / 6 observed · 0 missing · 0 excluded"] in table
    assert ["metadata.topic=odd", "answer_correct", "100.0%", "—", "6 / 6 observed · 0 missing · 0 excluded"] in table


@pytest.mark.slow
def test_inspect_case_export_and_runs(project):
    project.cases([case(1), case(2, ok=False)])
    run_id = project.run("run").out.split()[1]
    shown = project.run("inspect", run_id[:10], "--case", "c002")
    assert shown.code == 0
    lines = shown.out.splitlines()
    assert lines[lines.index("Input") + 1] == "  q: nope"
    assert lines[lines.index("Expected") + 1] == "  answer: answer 2"
    assert lines[lines.index("Judgments") + 1] == "  answer_correct: failed (expected_text_not_found)"
    exported = project.run("export", run_id)
    assert exported.code == 0
    record = json.loads((project.root / ".oloproof" / "bundles" / run_id / "cases.jsonl").read_text().splitlines()[1])
    assert record["id"] == "c002" and record["output"] == {"answer": "nope"} and record["artifacts"] == {}
    assert record["judgments"]["answer_correct"]["status"] == "fail"
    listed = project.run("runs")
    assert run_id in listed.out and "UNGATED/COMPLETE" in listed.out


@pytest.mark.slow
def test_init_copies_the_basic_example_which_runs(tmp_path):
    assert olo("init", "--example", "basic", "demo", cwd=tmp_path).code == 0
    result = olo("run", cwd=tmp_path / "demo")
    assert result.code == 0, result
    assert "Gate: PASS (exit 0)" in result.out
    again = olo("init", "--example", "basic", "demo", cwd=tmp_path)
    assert again.code == 2 and "already exists" in again.err
    unknown = olo("init", "--example", "nope", "x", cwd=tmp_path)
    assert unknown.code == 2 and "basic" in unknown.err


def test_plugins_lists_builtins_with_their_distribution(tmp_path):
    result = olo("plugins", cwd=tmp_path)
    table = rows(result.out)
    assert ["contains", "evaluator contains", "oloproof 0.1.0"] in table
    assert ["local", "store local", "oloproof 0.1.0"] in table


@pytest.mark.slow
def test_latest_names_the_newest_run_and_runs_shows_the_config(project):
    project.cases([case(1), case(2, ok=False)])
    first = project.run("run").out.split()[1]
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "concurrency: 2\n")
    second = project.run("run").out.split()[1]
    assert project.run("inspect", "latest").out.splitlines()[0].startswith(f"Run {second} ")
    listed = rows(project.run("runs").out)
    assert [r[0] for r in listed[1:]] == [second, first]  # newest first
    assert listed[0] == ["run", "created", "gate", "state", "system", "config", "cases"]


def test_missing_cases_are_summarised_and_an_empty_slice_is_noted(project):
    project.cases([case(1), case(2, boom=True), case(3, boom=True)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "slices: [metadata.topc]\n")
    result = project.run("run")
    assert "Missing: 2 of 3 cases produced no output: error: RuntimeError: boom (2)" in result.out
    assert "Slice metadata.topc: no case has a value for it (check the field name)" in result.out


def test_an_observed_count_rule_on_a_score_criterion_is_a_config_error(tmp_path):
    # Regression: a score criterion records no failures, so such a rule PASSed whatever the scores.
    from oloproof import ConfigError
    from oloproof_core.config.documents import Document
    from oloproof_core.decisions.gate import load_policy

    class Proportion:
        name, pass_fail = "proportion", True

    class Mean:
        name = "mean"

    (tmp_path / "oloproof.yaml").write_text("""policy:
  version: 1
  rules:
    - {id: fine, metric: answer_correct, kind: observed_count, max_failures: 0}
    - {id: never-fails, metric: ndcg_at_6, kind: observed_count, max_failures: 0}
""")
    doc = Document.load(tmp_path / "oloproof.yaml")
    policy = load_policy(doc, doc.data["policy"], tmp_path, ("policy",))
    with pytest.raises(ConfigError) as caught:
        policy.check_metrics({"answer_correct": Proportion(), "ndcg_at_6": Mean()})
    assert caught.value.render() == (
        "oloproof.yaml:5:7: $.policy.rules[1]: rule 'never-fails' counts failures of 'ndcg_at_6', which is not a "
        "pass/fail criterion (its metric is 'mean'); fix: use an interval rule (`min: 0.8`) on ndcg_at_6, or count "
        "failures of a pass/fail criterion")


def test_an_observed_count_rule_with_no_observed_case_is_insufficient_evidence(project):
    # Regression: with every case excluded there were 0 failures, and the rule PASSed on no evidence.
    project.cases([{**case(i), "expected": {}} for i in range(4)])  # no expected answer: all excluded
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + """
policy:
  version: 1
  rules:
    - {id: zero, metric: answer_correct, kind: observed_count, max_failures: 0}
""")
    result = project.run("run")
    assert result.code == 3, result
    assert ["zero", "answer_correct", "INSUFFICIENT_EVIDENCE", "no_observed_cases"] in rows(result.out)


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid_milliseconds(run_id: str) -> int:
    """The time a run id was made: its first ten characters, Crockford base32."""
    value = 0
    for char in run_id.removeprefix("run_")[:10]:
        value = value * 32 + CROCKFORD.index(char)
    return value


def test_run_ids_are_ulids_made_at_the_time_of_the_run_and_sort_by_it(project):
    import time

    project.cases([case(1)])
    made = []
    for _ in range(2):
        before = time.time_ns() // 1_000_000
        result = project.run("run")
        after = time.time_ns() // 1_000_000
        assert result.code == 0, result
        run_id = result.out.split()[1]
        assert re.fullmatch(r"run_[0-9A-HJKMNP-TV-Z]{26}", run_id), run_id
        assert before <= ulid_milliseconds(run_id) <= after, (before, run_id, after)
        made.append(run_id)
    assert made[0] < made[1] and project.runs() == made


def test_a_run_id_is_the_ulid_of_its_time_and_randomness():
    """The ULID specification's example (github.com/ulid/spec): 1469922850259 ms is 01ARZ3NDEK;
    the 80 random bits follow as 16 characters; ids made a millisecond apart sort by time."""
    import time

    from oloproof_core.engine.runner import new_run_id

    assert new_run_id(1469922850259, bytes(10)) == "run_01ARZ3NDEK0000000000000000"
    assert new_run_id(1469922850259, b"\xff" * 10) == "run_01ARZ3NDEKZZZZZZZZZZZZZZZZ"
    assert new_run_id(0, bytes(9) + b"\x01") == "run_" + "0" * 25 + "1"
    assert new_run_id(2**48 - 1, bytes(10)) == "run_7ZZZZZZZZZ0000000000000000"
    ids = set()
    for _ in range(50):  # each pair: the second made a millisecond or more after the first
        first = new_run_id()
        start = time.time_ns()
        while time.time_ns() // 1_000_000 <= start // 1_000_000:
            pass
        second = new_run_id()
        assert first < second and len(first) == len(second) == 30, (first, second)
        assert set(first[4:]) <= set(CROCKFORD) and ulid_milliseconds(second) > ulid_milliseconds(first)
        ids |= {first, second}
    assert len(ids) == 100


def test_the_judgments_of_an_in_process_evaluator_are_made_on_every_run(project):
    # contains is in-process and deterministic (cached = False): its judgments are made again on
    # every run, which costs less than a judgment-cache row, and count as misses
    project.cases([case(i) for i in range(5)])
    assert "Cache: execution 0 hit/5 miss; judgment 0 hit/5 miss" in project.run("run").out
    again = project.run("run")
    assert "Cache: execution 5 hit/0 miss; judgment 0 hit/5 miss" in again.out, again
    assert re.search(r"│ judgment +│ 0 +│", project.run("cache").out)

"""Streaming runs: the cases move through execute -> judge -> store in batches, large JSONL files
are read again per pass, and the printed and stored run is the one a single batch makes."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest

import oloproof
from oloproof_core.config import cases as cases_module
from oloproof_core.engine import runner
from oloproof_core.config.documents import SeenIds
from oloproof_core.outputs.report import render_run

from conftest import case

POLICY = """
policy:
  version: 1
  confidence_level: 0.95
  block_on: [FAIL]
  rules:
    - {id: correct, metric: answer_correct, kind: interval, min: 0.5}
    - {id: few-failures, metric: answer_correct, kind: observed_count, max_failures: 1000}
slices: [metadata.topic]
"""


@pytest.fixture
def fresh(monkeypatch, project):
    """``oloproof.run`` in this process, on the project's app, with sys.path restored after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "app", raising=False)
    return project


def stored(project, run_id: str) -> tuple[dict, list[dict]]:
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        summary = json.loads(db.execute("SELECT summary FROM runs WHERE id = ?", (run_id,)).fetchone()[0])
        records = [json.loads(r[0]) for r in
                   db.execute("SELECT record FROM run_cases WHERE run_id = ? ORDER BY idx", (run_id,))]
    return summary, records


def rows(n: int) -> list[dict]:
    out = []
    for i in range(n):
        row = case(i, ok=i % 7 != 0)
        row["id"] = f"c{i:05d}"
        if i % 97 == 5:
            row["input"]["boom"] = True  # the system raises: a case without an output
        if i % 113 == 9:
            row["expected"] = {}  # contains cannot judge it: excluded
        out.append(row)
    return out


def test_a_run_in_batches_prints_and_stores_what_one_batch_does(fresh, monkeypatch):
    fresh.write("oloproof.yaml", (fresh.root / "oloproof.yaml").read_text() + POLICY)
    fresh.cases(rows(2_500))
    monkeypatch.setattr(runner, "BATCH", 10_000)
    whole = oloproof.run(fresh.root / "oloproof.yaml", no_cache=True)
    monkeypatch.setattr(runner, "BATCH", 300)  # nine batches, the last one short
    monkeypatch.setattr(cases_module, "HELD_BYTES", 10_000)  # the file is read again by each pass
    assert isinstance(cases_module.load_cases("cases.jsonl", fresh.root), cases_module.CaseStream)
    streamed = oloproof.run(fresh.root / "oloproof.yaml", no_cache=True)

    def shown(outcome) -> list[str]:
        return render_run(outcome, 10)[1:]  # all but the line with the run's id

    assert shown(streamed) == shown(whole)
    text = "\n".join(shown(streamed))
    assert "Missing: 26 of 2500 cases produced no output: error: RuntimeError: boom (26)" in text
    assert "Excluded: answer_correct leaves out" in text and "metadata.topic=even" in text
    assert streamed.gate == whole.gate == "PASS"
    (summary_a, records_a), (summary_b, records_b) = stored(fresh, whole.run_id), stored(fresh, streamed.run_id)
    assert records_a == records_b and len(records_b) == 2_500
    assert [r["id"] for r in records_b] == [f"c{i:05d}" for i in range(2_500)], "stored in case order"
    assert summary_a["metrics"] == summary_b["metrics"]
    assert summary_a["decisions"] == summary_b["decisions"]


def test_a_store_with_no_cached_execution_is_not_asked_for_each_case(fresh, monkeypatch):
    """An empty execution cache (cache_holds) is not looked up batch by batch; once it holds the
    first run's executions, the next run asks for them and finds every one."""
    from oloproof_local.cache import Caches

    asked: list[tuple[str, int]] = []
    get_many = Caches.cache_get_many

    def counted(self, ns, keys):
        keys = list(keys)
        asked.append((ns, len(keys)))
        return get_many(self, ns, keys)

    monkeypatch.setattr(Caches, "cache_get_many", counted)
    monkeypatch.setattr(runner, "BATCH", 300)
    fresh.cases(rows(1_000))
    first = oloproof.run(fresh.root / "oloproof.yaml")
    assert [ns for ns, _ in asked if ns == "execution"] == [] and first.caches["execution"] == [0, 1_000]
    asked.clear()
    second = oloproof.run(fresh.root / "oloproof.yaml")
    assert [n for ns, n in asked if ns == "execution"] == [300, 300, 300, 100]
    assert second.caches["execution"] == [989, 11]  # the 11 without an output were not cached
    assert stored(fresh, second.run_id)[0]["metrics"] == stored(fresh, first.run_id)[0]["metrics"]


def test_a_case_file_that_changes_during_a_run_stops_it_and_stores_nothing(fresh, monkeypatch):
    fresh.write("app.py", '''
        from pathlib import Path
        from oloproof import system

        @system(name="echo", version="1")
        def run(input):
            if input["q"] == "answer 3":  # a case file edited while the run reads it
                with Path("cases.jsonl").open("a") as f:
                    f.write('{"id": "late", "input": {"q": "x"}}\\n')
            return {"answer": input["q"]}
    ''')
    fresh.cases([case(i) for i in range(40)])
    monkeypatch.chdir(fresh.root)
    monkeypatch.setattr(runner, "BATCH", 10)
    monkeypatch.setattr(cases_module, "HELD_BYTES", 100)
    with pytest.raises(oloproof.ConfigError, match="cases.jsonl changed after its cases were checked"):
        oloproof.run(fresh.root / "oloproof.yaml")
    assert fresh.runs() == []


def test_a_repeated_id_among_many_is_located_as_among_few(fresh, monkeypatch):
    rows_ = [case(i) for i in range(30)]
    rows_[25]["id"] = rows_[3]["id"]
    fresh.cases(rows_)
    with pytest.raises(oloproof.ConfigError) as exact:
        oloproof.run(fresh.root / "oloproof.yaml")
    monkeypatch.setattr(SeenIds, "EXACT", 10)  # ids past the tenth kept as digests
    with pytest.raises(oloproof.ConfigError) as digests:
        oloproof.run(fresh.root / "oloproof.yaml")
    assert str(digests.value) == str(exact.value)
    assert "duplicate id 'c003' (first on line 4)" in str(exact.value) and "cases.jsonl:26" in str(exact.value)
    assert fresh.runs() == []


def test_a_run_stopped_by_an_error_in_a_later_batch_leaves_nothing_in_the_store(fresh, monkeypatch):
    fresh.write("app.py", '''
        from oloproof import system
        from oloproof import current_case

        @system(name="echo", version="1")
        def run(input):
            if input["q"] == "answer 25":  # an artifact the system does not declare: stops the run
                current_case().record("retrieval/v1", {"items": []})
            return {"answer": input["q"]}
    ''')
    fresh.cases([case(i) for i in range(40)])
    monkeypatch.setattr(runner, "BATCH", 10)  # two batches stored before the third fails
    with pytest.raises(oloproof.ArtifactError):
        oloproof.run(fresh.root / "oloproof.yaml")
    assert fresh.runs() == []
    with sqlite3.connect(fresh.root / ".oloproof" / "store.db") as db:
        assert db.execute("SELECT COUNT(*) FROM run_cases").fetchone()[0] == 0
        # the finished cases are in the execution cache: the next run does not execute them again
        assert db.execute("SELECT COUNT(*) FROM cache WHERE ns = 'execution'").fetchone()[0] >= 20


@pytest.mark.parametrize("scores", [False, True])
def test_a_column_summarises_as_the_list_of_its_judgments(scores):
    """The compact column a streaming run keeps gives every metric and gate rule what the list of
    judgments gives: the same values in the same order, counts and intervals."""
    import random

    from oloproof_core.decisions.gate import Rule, decide_rule
    from oloproof_core.model.records import Column, Judgment, tally
    from oloproof_core.hooks.manager import Plugins, make_plugin_manager

    rng = random.Random(17)
    judgments = []
    for _ in range(3_000):
        roll = rng.random()
        if roll < 0.05:
            judgments.append(Judgment.missing("timeout"))
        elif roll < 0.1:
            judgments.append(Judgment.excluded("no_relevance_labels"))
        elif scores:
            judgments.append(Judgment.score(rng.choice([0.0, 0.25, 0.5, 1.0])))
        else:
            judgments.append(Judgment.of(roll < 0.8))
    column = Column()
    for j in judgments:
        column.append(j)
    values, missing, excluded = tally(judgments)
    c_values, c_missing, c_excluded = tally(column)
    assert list(c_values) == values and (c_missing, c_excluded) == (missing, excluded)
    assert [(j.status, j.value) for j in column] == [(j.status, j.value) for j in judgments]
    plugins = Plugins(make_plugin_manager())
    metric = plugins.metrics.get("mean" if scores else "proportion").factory()
    assert metric.summarize(column, 0.95) == metric.summarize(judgments, 0.95)
    rule = Rule(id="r", metric="m", kind="interval", min=0.7)
    assert decide_rule(rule, column, metric, 0.95) == decide_rule(rule, judgments, metric, 0.95)

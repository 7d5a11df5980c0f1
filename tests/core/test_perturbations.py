"""Perturbation interventions (distractors, shuffle, drop-relevant, truncate) through headroom, on a
fixture whose failures have hidden causes: a retriever that ranks the answer at 3 under top_k 2
for some questions, and a model that fails on long contexts for others."""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import Project
from test_diagnose import child_records, no_causal_claim, run_id_of

APP = '''
"""A staged fixture with two hidden causes (tests/core/test_perturbations.py)."""

from oloproof import Passage, Retrieval, rag_system

DOCS = {
    "ans": "the answer is blue",
    "f1": "filler one two three",
    "f2": "filler four five six",
    "long": "a long passage of twelve words that makes the whole context long",
}
LONG = 14  # the model loses the answer in a context of more words than this


@rag_system(name="hidden", version="1", depth=4, top_k=2, index_version="hidden-1")
class Hidden:
    def retrieve(self, input, depth):
        return Retrieval(query=input["q"], depth=depth, candidates=tuple(
            Passage(doc_id=d, score=1.0 / i, text=DOCS[d]) for i, d in enumerate(input["docs"][:depth], 1)))

    def generate(self, input, context):
        words = sum(len((item.text or "").split()) for item in context.items)
        if words > LONG:
            return {"answer": "lost in a long context"}
        return {"answer": " ".join(item.text or "" for item in context.items)}

    def count_tokens(self, passage):
        return len((passage.text or "").split())
'''

CONFIG = """
system:
  name: hidden
  version: "1"
  rag: app:Hidden
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
"""


def case(case_id: str, docs: list[str]) -> dict:
    return {"id": case_id, "input": {"q": case_id, "docs": docs},
            "expected": {"answer": "blue", "relevant": [{"doc_id": "ans"}],
                         "gold_context": [{"doc_id": "ans", "text": "the answer is blue"}]}}


RANKED = [f"ranked_{i}" for i in range(8)]  # the answer at 3, top_k 2: a wider top-k fixes them
LONG = [f"long_{i}" for i in range(4)]  # the answer at 1 beside a long passage: the model fails
OK = [f"ok_{i}" for i in range(8)]  # the answer at 1 beside a short passage: passes


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    project = Project(tmp_path_factory.mktemp("hidden"))
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG)
    project.cases([case(i, ["f1", "f2", "ans"]) for i in RANKED] + [case(i, ["ans", "long"]) for i in LONG]
                  + [case(i, ["ans", "f1"]) for i in OK])
    run_id = run_id_of(project.run("run"))
    result = project.run("headroom", run_id, "--intervention", "distractors", "--option", "count=2",
                         "--intervention", "shuffle", "--intervention", "drop-relevant",
                         "--intervention", "truncate", "--option", "words=4", "--intervention", "top-k", "--top-k", "3",
                         "--intervention", "gold-context", "--criterion", "answer_correct", "--format", "json",
                         "--markdown", "headroom.md")
    assert result.code == 0, result
    return project, run_id, json.loads(result.out)


@pytest.mark.slow  # a run and twelve child runs
def test_the_ranking_puts_the_wider_top_k_first_and_shows_the_long_context_weakness(hidden):
    project, run_id, doc = hidden
    rows = {r["intervention"]: r for r in doc["rows"]}
    shippable = [r["intervention"] for r in doc["rows"] if r["intervention"] != "gold-context"]
    assert shippable[0] == "top-k", [(r["label"], r["paired"]["low"]) for r in doc["rows"]]
    assert rows["top-k"]["fixed"] == RANKED and rows["top-k"]["paired"]["low"] > 0
    # shorter passages recover exactly the long-context cases; gold context (short) bounds both
    assert rows["truncate"]["fixed"] == LONG and rows["truncate"]["broken"] == []
    assert rows["gold-context"]["fixed"] == sorted(LONG + RANKED)
    # two distractors make every passing context long: the weakness, with an interval below zero
    distractors = rows["distractors"]
    assert distractors["label"] == "distractors 2 at first"
    assert distractors["broken"] == OK and distractors["fixed"] == []
    assert distractors["paired"]["high"] < 0, distractors["paired"]
    # order does not matter to this model; its evidence does
    assert rows["shuffle"]["fixed"] == rows["shuffle"]["broken"] == [] and rows["shuffle"]["paired"]["difference"] == 0
    assert rows["drop-relevant"]["broken"] == OK and rows["drop-relevant"]["paired"]["high"] < 0
    # the distractors came from other questions' retrievals, never the case's own relevant passage
    applied = child_records(project, distractors["run"])
    for case_id, record in applied.items():
        context = record["artifacts"]["context/v1"][-1]
        assert context["source"] == "distractors"
        # two held and two drawn; a ranked case's context holds both short fillers, so only the long one is left
        assert len(context["items"]) == (3 if case_id in RANKED else 4), (case_id, context)
        assert [i["doc_id"] for i in context["items"]].count("ans") == (0 if case_id in RANKED else 1)
    control = child_records(project, distractors["control_run"])
    assert all(r["artifacts"]["context/v1"][-1]["source"] == "retrieval" for r in control.values())
    text = project.run("inspect", doc["id"]).out
    assert "Candidate experiment: top-k 3, the highest lower bound of the gain among the changes measured." in text
    no_causal_claim(text)
    markdown = (project.root / "headroom.md").read_text(encoding="utf-8")  # --markdown carries the same table
    for row in doc["rows"]:
        display = row["paired"]["display"]
        assert f"| {row['label']} | {display['difference']} | {display['interval']} | {row['paired']['paired']} |" \
            in markdown, markdown
    assert f"- Broken under distractors 2 at first: {', '.join(OK[:5])} and 3 more" in markdown


@pytest.mark.slow  # a run and a refused headroom
@pytest.mark.parametrize(("args", "expected"), [
    (("--intervention", "truncate"), "--intervention truncate needs --option words=N"),
    (("--intervention", "distractors", "--option", "position=middle"),
     "position must be first, last or a whole number >= 1, got 'middle'"),
    (("--intervention", "distractors", "--option", "count=0"), "count must be a whole number >= 1, got 0"),
])
def test_bad_options_stop_before_anything_runs(tmp_path, args, expected):
    project = Project(tmp_path)
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG)
    project.cases([case("ok_0", ["ans", "f1"])])
    run_id = run_id_of(project.run("run"))
    before = project.runs()
    result = project.run("headroom", run_id, *args, "--criterion", "answer_correct")
    assert result.code == 2 and expected in result.err, result
    assert project.runs() == before


@pytest.mark.slow  # a run of 40 cases and two sequential interventions
def test_until_decided_stops_each_intervention_at_the_first_look_that_decides(tmp_path):
    """--until-decided: the cases run in a seeded order, looked at every batch; an intervention stops
    at the first look where the paired interval (compare's betting interval, a confidence sequence)
    excludes zero or lies below the margin. Recomputed here from the stored child runs, look by look."""
    from oloproof_core.statistics.intervals import paired_difference

    project = Project(tmp_path)
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG)
    ranked = [f"ranked_{i:02d}" for i in range(24)]
    project.cases([case(i, ["f1", "f2", "ans"]) for i in ranked] + [case(f"ok_{i:02d}", ["ans", "f1"]) for i in range(16)])
    run_id = run_id_of(project.run("run"))
    result = project.run("headroom", run_id, "--intervention", "top-k", "--top-k", "3", "--intervention", "shuffle",
                         "--criterion", "answer_correct", "--until-decided", "--batch", "5", "--margin", "40",
                         "--format", "json")
    assert result.code == 0, result
    doc = json.loads(result.out)
    assert doc["sequential"] == {"seed": 0, "batch": 5, "margin": 0.4}
    rows = {r["intervention"]: r for r in doc["rows"]}
    expected = {"top-k": "interval_excludes_zero", "shuffle": "interval_below_margin"}
    for name, row in rows.items():
        stopped = row["stopped"]
        assert stopped["reason"] == expected[name] and stopped["after"] < 40 and stopped["of"] == 40, row
        applied, control = child_records(project, row["run"]), child_records(project, row["control_run"])
        assert len(applied) == len(control) == stopped["after"] == row["cost"]["calls"]
        with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:  # stored in the order they ran
            order = [r[0] for r in db.execute("SELECT case_id FROM run_cases WHERE run_id = ? ORDER BY idx",
                                              (row["run"],))]
        assert sorted(order) == sorted(applied)
        x = [applied[i]["judgments"]["answer_correct"]["value"] for i in order]
        y = [control[i]["judgments"]["answer_correct"]["value"] for i in order]
        for look in range(1, stopped["looks"] + 1):
            diff, low, high = paired_difference(x[:5 * look], y[:5 * look], 0.95)
            decided = low > 0 or high < 0 or high < 0.4
            assert decided == (look == stopped["looks"]), (name, look, low, high)
        assert (row["paired"]["low"], row["paired"]["high"]) == paired_difference(x, y, 0.95)[1:]
    text = project.run("inspect", doc["id"]).out
    assert f"Stopped under top-k 3: after {rows['top-k']['stopped']['after']} of 40 cases" in text, text
    assert "its interval excludes zero" in text and "its interval lies below the margin" in text
    refused = project.run("headroom", run_id, "--intervention", "shuffle", "--margin", "5", "--criterion", "answer_correct")
    assert refused.code == 2 and "--margin applies to --until-decided only" in refused.err, refused

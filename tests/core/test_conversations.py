"""Conversations: cases with ``turns`` read into turn cases, executed in waves with the history of
this run's earlier turns, clustered by conversation (docs/conversations.md). Real runs of the
command line on small projects; the expected histories are written out here by hand."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import Project
from test_cli_run import POLICY

from oloproof_core.config.cases import load_cases
from oloproof_core.config.turns import conversation_of, turn_of
from oloproof_core.engine.conversations import whole_batches
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import Case

CHAT = '''
from oloproof import current_case, system

@system(name="chat", version="1")
def run(input, history):
    assert history == current_case().history
    q = input["q"]
    if q == "boom":
        raise RuntimeError("boom")
    said = " / ".join(turn["output"]["answer"] for turn in history)
    return {"answer": f"{q} [t{current_case().trial}] after: {said}" if history else f"{q} [t{current_case().trial}]"}
'''

CONFIG = """
system: {name: chat, version: "1", callable: app:run}
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
"""

CONVERSATIONS = [
    {"id": "plain", "input": {"q": "alone"}, "expected": {"answer": "alone"}},
    {"id": "refund", "metadata": {"topic": "refunds"},
     "turns": [{"input": {"q": "refund?"}, "expected": {"answer": "refund"}},
               {"input": {"q": "annual?"}, "expected": {"answer": "after: refund?"}, "needs_history": True},
               {"input": {"q": "monthly?"}, "expected": {"answer": "nothing"}, "metadata": {"kind": "follow-up"}}]},
    {"id": "broken", "turns": [{"input": {"q": "boom"}}, {"input": {"q": "then?"}, "expected": {"answer": "then"}}]},
]


def records(root: Path) -> tuple[dict, dict, list[dict]]:
    with sqlite3.connect(root / ".oloproof" / "store.db") as con:
        run_id, header, summary = con.execute("SELECT id, header, summary FROM runs ORDER BY id DESC").fetchone()
        rows = [json.loads(r[0]) for r in con.execute("SELECT record FROM run_cases WHERE run_id = ? ORDER BY idx",
                                                      (run_id,))]
    return json.loads(header), json.loads(summary), rows


@pytest.fixture
def chat(project: Project) -> Project:
    project.write("app.py", CHAT)
    project.write("oloproof.yaml", CONFIG)
    project.cases(CONVERSATIONS)
    return project


def test_turns_become_turn_cases(tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS))
    cases = load_cases("cases.jsonl", tmp_path)
    assert [c.id for c in cases] == ["plain", "refund#1", "refund#2", "refund#3", "broken#1", "broken#2"]
    second = cases[2]
    assert second.metadata == {"topic": "refunds", "conversation": "refund", "turn": 2, "needs_history": True}
    assert cases[3].metadata["kind"] == "follow-up" and cases[3].metadata["needs_history"] is False
    assert second.source == "cases.jsonl:2" and second.history == ()
    assert [conversation_of(c) for c in cases] == ["plain", "refund", "refund", "refund", "broken", "broken"]
    assert [turn_of(c) for c in cases] == [1, 1, 2, 3, 1, 2]
    assert "history" not in second.to_data()  # a record without history is as before


def test_yaml_turns_are_located_at_their_lines(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(
        "- id: talk\n"
        "  turns:\n"
        "    - input: {q: one}\n"
        "    - input: {q: two}\n"
        "      needs_history: yes\n")
    with pytest.raises(ConfigError) as err:
        load_cases("cases.yaml", tmp_path)
    assert err.value.where == "cases.yaml:4"
    assert "$.turns[1].needs_history: expected true or false, got 'yes'" in err.value.problem
    (tmp_path / "cases.yaml").write_text("- id: talk\n  turns:\n    - input: {q: one}\n    - {input: {q: two}}\n")
    assert [c.source for c in load_cases("cases.yaml", tmp_path)] == ["cases.yaml:3", "cases.yaml:4"]


@pytest.mark.parametrize("record, problem, fix", [
    ({"id": "a", "input": {"q": 1}, "turns": [{"input": {}}]},
     "$.input: a conversation has turns, each with its own input and expected", "move input into the turns"),
    ({"id": "a", "turns": []}, "$.turns: expected a non-empty list of turns, got []", "write"),
    ({"id": "a", "turns": [{"input": {}}, {"inptu": {}}]}, "$.turns[1].inptu: unknown field 'inptu'",
     "rename it to 'input'"),
    ({"id": "a", "turns": [{"expected": {}}]}, "$.turns[0].input: missing input", 'add "input"'),
    ({"id": "a", "turns": [{"input": "hi"}]}, "$.turns[0].input: expected a JSON object, got 'hi'", 'write "input"'),
    ({"id": "a", "turns": ["hi"]}, "$.turns[0]: expected a turn object, got 'hi'", "for each turn"),
    ({"id": "a", "metadata": {"turn": 3}, "turns": [{"input": {}}]}, "$.metadata.turn: set by Oloproof",
     "rename the key 'turn'"),
])
def test_bad_turns_are_located(tmp_path: Path, record: dict, problem: str, fix: str) -> None:
    (tmp_path / "cases.jsonl").write_text(json.dumps({"id": "first", "input": {}}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(ConfigError) as err:
        load_cases("cases.jsonl", tmp_path)
    assert err.value.where == "cases.jsonl:2"
    assert problem in err.value.problem and fix in err.value.fix


def test_a_turn_id_taken_by_another_case_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text(json.dumps({"id": "a", "turns": [{"input": {}}, {"input": {}}]}) + "\n"
                                          + json.dumps({"id": "a#2", "input": {}}) + "\n")
    with pytest.raises(ConfigError) as err:
        load_cases("cases.jsonl", tmp_path)
    assert err.value.where == "cases.jsonl:2" and "'a#2' is also a turn of a conversation" in err.value.problem


def test_a_batch_never_splits_a_conversation() -> None:
    def turn(conversation: str, k: int) -> Case:
        return Case(id=f"{conversation}#{k}", input={},
                    metadata={"conversation": conversation, "turn": k, "needs_history": False})

    cases = [turn("a", 1), turn("a", 2), turn("a", 3), Case(id="p", input={}), turn("b", 1), turn("b", 2)]
    assert [[c.id for c in b] for b in whole_batches(cases, 2)] == [["a#1", "a#2", "a#3"], ["p", "b#1", "b#2"]]
    assert [len(b) for b in whole_batches(cases, 1)] == [3, 1, 2]


def test_a_conversation_runs_turn_by_turn_with_its_history(chat: Project) -> None:
    result = chat.run("run")
    assert result.code == 0, result
    assert "6 cases in 3 clusters by metadata.conversation" in result.out
    header, summary, rows = records(chat.root)
    assert header["design"]["cluster"] == "metadata.conversation" and header["design"]["estimand"] == "cases"
    by_id = {r["id"]: r for r in rows}
    assert list(by_id) == ["plain", "refund#1", "refund#2", "refund#3", "broken#1", "broken#2"]
    assert "history" not in by_id["plain"]["case"] and "history" not in by_id["refund#1"]["case"]
    assert by_id["refund#2"]["case"]["history"] == [{"input": {"q": "refund?"}, "output": {"answer": "refund? [t0]"}}]
    assert by_id["refund#3"]["case"]["history"] == [
        {"input": {"q": "refund?"}, "output": {"answer": "refund? [t0]"}},
        {"input": {"q": "annual?"}, "output": {"answer": "annual? [t0] after: refund? [t0]"}}]
    assert by_id["refund#3"]["output"] == {"answer": "monthly? [t0] after: refund? [t0] / annual? [t0] after: refund? [t0]"}
    assert by_id["refund#2"]["cluster"] == "refund" and by_id["plain"]["cluster"] == "case:plain"
    assert by_id["refund#3"]["case"]["metadata"] == {"topic": "refunds", "kind": "follow-up", "conversation": "refund",
                                                     "turn": 3, "needs_history": False}
    # a turn after a turn without output is not executed
    assert by_id["broken#1"]["missing"].startswith("error: RuntimeError: boom")
    assert by_id["broken#2"]["missing"] == "earlier_turn_missing: broken#1"
    assert "history" not in by_id["broken#2"]["case"]
    assert summary["metrics"]["answer_correct"]["observed"] == 2  # clusters: plain and refund (broken is missing)


def test_each_trial_keeps_its_own_history(chat: Project) -> None:
    result = chat.run("run", "--trials", "2")
    assert result.code == 0, result
    _, _, rows = records(chat.root)
    second = next(r for r in rows if r["id"] == "refund#2")
    assert second["case"]["history"] == [{"input": {"q": "refund?"}, "output": {"answer": "refund? [t0]"}}]
    assert [t["history"] for t in second["trials"]] == [
        [{"input": {"q": "refund?"}, "output": {"answer": "refund? [t0]"}}],
        [{"input": {"q": "refund?"}, "output": {"answer": "refund? [t1]"}}]]
    assert second["trials"][1]["output"] == {"answer": "annual? [t1] after: refund? [t1]"}


def test_a_function_without_history_is_called_as_before(chat: Project) -> None:
    chat.write("app.py", '''
        from oloproof import current_case, system

        @system(name="chat", version="1")
        def run(input):
            return {"answer": input["q"] + " " + str(len(current_case().history))}
    ''')
    assert chat.run("run").code == 0
    _, _, rows = records(chat.root)
    assert [r["output"]["answer"] for r in rows if r["id"].startswith("refund")] == ["refund? 0", "annual? 1", "monthly? 2"]


STAGED = '''
from oloproof import Passage, Retrieval, rag_system

SEEN = []

@rag_system(name="staged", version="1", depth=2)
class Chat:
    def retrieve(self, input, depth, history):
        topic = " ".join(turn["input"]["q"] for turn in history) + " " + input["q"]
        return Retrieval(query=topic.strip(), depth=depth, candidates=(Passage(doc_id="kb", text=topic.strip()),))

    def generate(self, input, context):
        return {"answer": context.items[0].text}
'''


@pytest.mark.slow  # two runs of the command line
def test_a_staged_system_is_given_the_history_where_it_asks(chat: Project) -> None:
    chat.write("app.py", STAGED)
    chat.write("oloproof.yaml", CONFIG.replace("callable: app:run", "rag: app:Chat"))
    chat.cases(CONVERSATIONS[:2])
    result = chat.run("run")
    assert result.code == 0, result
    _, _, rows = records(chat.root)
    assert [r["output"]["answer"] for r in rows] == ["alone", "refund?", "refund? annual?", "refund? annual? monthly?"]
    assert rows[2]["artifacts"]["retrieval/v1"][0]["query"] == "refund? annual?"
    # what each turn searched for; a plain case records no query_rewrite/v1
    assert [r["artifacts"].get("query_rewrite/v1") for r in rows] == [
        None, [{"query": "refund?"}], [{"query": "refund? annual?"}], [{"query": "refund? annual? monthly?"}]]
    again = chat.run("run")  # every stage and execution from the cache
    assert "execution 4 hit/0 miss" in again.out, again


def test_cluster_beside_conversations_is_an_error(chat: Project) -> None:
    chat.write("oloproof.yaml", CONFIG + "cluster: metadata.topic\n")
    result = chat.run("run")
    assert result.code == 2
    assert "oloproof.yaml:5:1: $.cluster:" in result.err and "the cases hold conversations, which are the clusters" in result.err
    assert "remove cluster:" in result.err
    assert chat.runs() == []


def test_until_decided_with_conversations_is_an_error(chat: Project) -> None:
    chat.write("oloproof.yaml", CONFIG + POLICY % 0.5)
    result = chat.run("run", "--until-decided")
    assert result.code == 2, result
    assert "this suite's cases hold conversations" in result.err and "run without --until-decided" in result.err
    assert chat.runs() == []

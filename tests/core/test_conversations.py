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


def test_conversation_criteria_and_the_first_failing_turn(chat: Project) -> None:
    chat.cases([
        {"id": "ok", "turns": [{"input": {"q": "a"}, "expected": {"answer": "a"}},
                               {"input": {"q": "b"}, "expected": {"answer": "b"}}]},
        {"id": "late", "turns": [{"input": {"q": "a"}, "expected": {"answer": "a"}},
                                 {"input": {"q": "b"}, "expected": {"answer": "zzz"}},
                                 {"input": {"q": "c"}, "expected": {"answer": "zzz"}}]},
        {"id": "early", "turns": [{"input": {"q": "a"}, "expected": {"answer": "zzz"}},
                                  {"input": {"q": "b"}, "expected": {"answer": "b"}}]},
        {"id": "second", "turns": [{"input": {"q": "a"}, "expected": {"answer": "a"}},
                                   {"input": {"q": "b"}, "expected": {"answer": "zzz"}}]},
        {"id": "plain", "input": {"q": "a"}, "expected": {"answer": "zzz"}},
    ])
    result = chat.run("run", "--json", "out.json")
    assert result.code == 0, result
    assert "First failing turn: answer_correct (all turns): turn 1 (2), turn 2 (2); 4 of 5 conversations failed" \
        in result.out
    header, summary, rows = records(chat.root)
    assert header["metrics"]["answer_correct (all turns)"] == "proportion"
    assert header["evaluators"]["answer_correct (all turns)"]["derived"] == "all_turns"
    assert summary["conversations"] == {"conversations": 5, "first_failing_turn": {
        "answer_correct (all turns)": {"1": 2, "2": 2}}}
    # one conversation, one unit: 1 of 5 conversations passed every turn
    metric = summary["metrics"]["answer_correct (all turns)"]
    assert metric["value"] == pytest.approx(1 / 5) and metric["observed"] == 5
    by_id = {r["id"]: r["judgments"]["answer_correct (all turns)"] for r in rows}
    assert by_id["late#1"] == by_id["late#2"] == {"status": "excluded", "reason": "judged_on_last_turn"}
    assert by_id["late#3"] == {"status": "fail", "value": 0.0, "reason": "turn 2 failed",
                               "detail": {"first_failing_turn": 2}}
    assert by_id["ok#2"]["status"] == "pass" and by_id["plain"]["reason"] == "turn 1 failed"
    assert "judged_on_last_turn" not in result.out  # by design, not a reason worth a line
    document = json.loads((chat.root / "out.json").read_text())
    assert document["units"]["conversations"] == summary["conversations"]
    assert [m["name"] for m in document["metrics"]] == ["answer_correct", "answer_correct (all turns)"]


TRANSCRIPT_JUDGE = """
  - type: rubric_judge
    criterion: kept_constraint
    scope: conversation
    rubric: The assistant keeps the user's budget across turns.
    question_field: q
    provider: replay
    model: replay
    provider_options: {file: replies.jsonl, default: fail}
"""


def test_a_judge_with_scope_conversation_reads_the_whole_transcript(chat: Project) -> None:
    chat.write("oloproof.yaml", CONFIG + TRANSCRIPT_JUDGE)
    # the reply passes only a prompt holding the whole transcript, turn by turn
    chat.write("replies.jsonl", json.dumps({"match": [
        "Turn 1\nUser: refund?\nAssistant: refund? [t0]",
        "Turn 2\nUser: annual?\nAssistant: annual? [t0] after: refund? [t0]",
        "Turn 3\nUser: monthly?\nAssistant: monthly?", "keeps the user's budget across turns"],
        "verdict": "pass", "rationale": "kept"}) + "\n")
    result = chat.run("run")
    assert result.code == 0, result
    header, summary, rows = records(chat.root)
    judged = {r["id"]: r["judgments"]["kept_constraint"] for r in rows}
    assert judged["refund#3"]["status"] == "pass"
    assert judged["refund#1"] == judged["refund#2"] == {"status": "excluded", "reason": "judged_on_last_turn"}
    assert judged["plain"]["status"] == "fail"  # its one-turn transcript does not match
    assert judged["broken#2"]["status"] == "missing"
    identity = header["evaluators"]["kept_constraint"]
    assert identity["scope"] == "conversation" and identity["extra"]["prompt_version"] == "rubric/transcript-v1"
    # a judge over the transcript is not a turn criterion: no "(all turns)" of it
    assert "kept_constraint (all turns)" not in summary["metrics"]
    assert summary["metrics"]["kept_constraint"]["observed"] == 2  # plain and refund; broken is missing


def test_scope_conversation_on_a_judge_without_a_transcript_prompt_is_an_error(chat: Project) -> None:
    chat.write("oloproof.yaml", CONFIG + "  - {type: contains, criterion: again, field: answer, scope: conversation}\n")
    result = chat.run("run")
    assert result.code == 2
    assert "oloproof.yaml:5:" in result.err and "does not judge a whole conversation" in result.err
    chat.write("replies.jsonl", "")
    chat.write("oloproof.yaml", CONFIG + TRANSCRIPT_JUDGE.replace("scope: conversation", "scope: dialogue"))
    result = chat.run("run")
    assert result.code == 2 and "scope must be turn or conversation, got 'dialogue'" in result.err


def test_a_changed_earlier_turn_misses_the_later_turns(chat: Project) -> None:
    chat.cases(CONVERSATIONS[:2])
    first = chat.run("run")
    assert "Cache: execution 0 hit/4 miss" in first.out, first
    again = chat.run("run")  # an unchanged conversation: every turn from the cache
    assert "Cache: execution 4 hit/0 miss" in again.out, again
    changed = json.loads(json.dumps(CONVERSATIONS[:2]))
    changed[1]["turns"][0]["input"]["q"] = "refund, please?"  # the first turn only
    chat.cases(changed)
    third = chat.run("run")
    # the plain case hits; the changed turn misses, and so does every later turn (its history changed)
    assert "Cache: execution 1 hit/3 miss" in third.out, third
    _, _, rows = records(chat.root)
    assert rows[2]["case"]["history"][0]["input"] == {"q": "refund, please?"}


STAGES = '''
from oloproof import Passage, Retrieval, rag_system

@rag_system(name="staged", version="1", depth=2)
class Chat:
    def retrieve(self, input, depth, history):
        said = " ".join(str(turn["output"]["answer"]) for turn in history)
        return Retrieval(query=(said + " " + input["q"]).strip(), depth=depth,
                         candidates=(Passage(doc_id="kb", text=input["q"]),))

    def generate(self, input, context):
        return {"answer": context.items[0].text + "!"}
'''


@pytest.mark.slow  # three runs of the command line
def test_a_changed_earlier_output_misses_the_later_retrieval(chat: Project) -> None:
    chat.write("app.py", STAGES)
    chat.write("oloproof.yaml", CONFIG.replace("callable: app:run", "rag: app:Chat"))
    chat.cases(CONVERSATIONS[:2])
    first = chat.run("run")
    assert "Stages: retrieve 0 hit/4 miss; generate 0 hit/4 miss" in first.out, first
    chat.write("app.py", STAGES.replace('"!"', '"?"'))  # generate changes: every turn's output does
    second = chat.run("run")
    # retrieve's code is unchanged: the first turns hit, the later turns (their history changed) miss
    assert "Stages: retrieve 2 hit/2 miss; generate 0 hit/4 miss" in second.out, second
    chat.write("app.py", STAGES.replace('"!"', '"?"') + "\n# a comment\n")
    third = chat.run("run")  # the same outputs again: every stage from its cache
    assert "Stages: retrieve 4 hit/0 miss; generate 4 hit/0 miss" in third.out, third


DIAGNOSED = '''
import json
from pathlib import Path

from oloproof import Passage, Retrieval, rag_system

HERE = Path(__file__).resolve().parent
DOCS = {"refund": "refunds take 14 days", "annual": "annual plans refund in 30 days", "f1": "filler words"}


@rag_system(name="chat", version="1", depth=2, top_k=2)
class Chat:
    def retrieve(self, input, depth):  # the current message only: a follow-up retrieves nothing useful
        return Retrieval(query=input["q"], depth=depth, candidates=tuple(
            Passage(doc_id=d, score=1.0, text=DOCS[d]) for d in input["docs"]))

    def generate(self, input, context, history):
        with open(HERE / "history.log", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(history) + "\\n")
        return {"answer": " ".join(item.text for item in context.items)}
'''


def gold(doc: str) -> dict:
    return {"answer": DOCS_TEXT[doc].split()[-2], "relevant": [{"doc_id": doc}],
            "gold_context": [{"doc_id": doc, "text": DOCS_TEXT[doc]}]}


DOCS_TEXT = {"refund": "refunds take 14 days", "annual": "annual plans refund in 30 days"}
TALK = [{"id": "talk", "turns": [
    {"input": {"q": "How long do refunds take?", "docs": ["refund", "f1"]}, "expected": gold("refund")},
    {"input": {"q": "And for annual plans?", "docs": ["f1"]}, "expected": gold("annual"), "needs_history": True}]},
    # the same failure as a single-turn case: diagnosed alike
    {"id": "single", "input": {"q": "Annual plan refunds?", "docs": ["f1"]}, "expected": gold("annual")}]


@pytest.mark.slow  # a run and three diagnoses through the command line
def test_diagnosing_a_turn_replays_its_recorded_history(chat: Project) -> None:
    chat.write("app.py", DIAGNOSED)
    chat.write("oloproof.yaml", CONFIG.replace("callable: app:run", "rag: app:Chat"))
    chat.cases(TALK)
    run = chat.run("run")
    assert run.code == 0, run
    run_id = run.out.split()[1]
    _, _, rows = records(chat.root)
    assert [r["judgments"]["answer_correct"]["status"] for r in rows] == ["pass", "fail", "fail"]
    (chat.root / "history.log").unlink()
    diagnosis = chat.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct")
    assert diagnosis.code == 0, diagnosis
    assert "RETRIEVAL_MISS: 2 of 2, recovered; no relevant evidence was retrieved" in diagnosis.out
    assert "History: each turn was re-executed with the earlier turns recorded in the run" in diagnosis.out
    assert "Turns: turn 2: RETRIEVAL_MISS 1" in diagnosis.out and "History differs" not in diagnosis.out
    recorded = [{"input": TALK[0]["turns"][0]["input"], "output": rows[0]["output"]}]
    logged = [json.loads(line) for line in (chat.root / "history.log").read_text().splitlines()]
    assert sorted(map(json.dumps, logged)) == sorted(map(json.dumps, [recorded, recorded, [], []]))  # apply, control
    # one turn, by its id; the case file's first turn changed since the run: said, and the recording replayed
    changed = json.loads(json.dumps(TALK))
    changed[0]["turns"][0]["input"]["q"] = "How long does a refund take?"
    chat.cases(changed)
    (chat.root / "history.log").unlink()
    one = chat.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct",
                   "--case", "talk#2")
    assert one.code == 0, one
    assert "RETRIEVAL_MISS: 1 of 1" in one.out
    assert ("History differs: talk#2's earlier turns in the case file (talk#1) are not what the run recorded; "
            "the recorded history was replayed") in one.out
    logged = [json.loads(line) for line in (chat.root / "history.log").read_text().splitlines()]
    assert logged == [recorded, recorded]
    wrong = chat.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct",
                     "--case", "talk#1")
    assert wrong.code == 2 and "case 'talk#1' did not fail answer_correct" in wrong.err
    whole = chat.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct (all turns)")
    assert whole.code == 2 and "diagnose the turns that failed: --criterion answer_correct" in whole.err
    # headroom re-executes every turn, each with its recorded history too
    (chat.root / "history.log").unlink()
    headroom = chat.run("headroom", run_id, "--intervention", "gold-context", "--criterion", "answer_correct")
    assert headroom.code == 0, headroom
    logged = [json.loads(line) for line in (chat.root / "history.log").read_text().splitlines()]
    assert sorted(map(json.dumps, logged)) == sorted(map(json.dumps, [recorded] * 2 + [[]] * 4))


def test_json_and_junit_carry_the_turns(chat: Project) -> None:
    import xml.etree.ElementTree as ET

    import jsonschema
    from test_outputs import schema

    result = chat.run("run", "--json", "out.json", "--junit", "out.xml", "--junit-cases")
    assert result.code == 0, result
    document = json.loads((chat.root / "out.json").read_text())
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)
    assert document["conversations"] == [
        {"id": "plain", "turns": ["plain"], "verdicts": {"answer_correct (all turns)": "pass"}},
        {"id": "refund", "turns": ["refund#1", "refund#2", "refund#3"], "verdicts": {"answer_correct (all turns)": "fail"}},
        {"id": "broken", "turns": ["broken#1", "broken#2"], "verdicts": {"answer_correct (all turns)": "missing"}}]
    cases = ET.parse(chat.root / "out.xml").getroot().find("testsuite[@name='oloproof.cases']")
    shown = [(c.get("classname"), c.get("name")) for c in cases.findall("testcase")]
    assert shown[:5] == [("oloproof.cases", "plain · answer_correct"),
                         ("oloproof.cases", "plain · answer_correct (all turns)"),
                         ("refund", "refund#1 · answer_correct"), ("refund", "refund#2 · answer_correct"),
                         ("refund", "refund#3 · answer_correct")]
    # a conversation criterion is one test case a conversation, on its last turn
    assert ("refund", "refund#3 · answer_correct (all turns)") in shown
    assert ("refund", "refund#1 · answer_correct (all turns)") not in shown


def test_a_turn_selected_without_its_earlier_turns_is_missing(chat: Project) -> None:
    result = chat.run("run", "--filter", "id=refund#2")
    assert result.code == 0, result
    _, _, rows = records(chat.root)
    assert [(r["id"], r["missing"]) for r in rows] == [("refund#2", "earlier_turn_missing: refund#1")]
    whole = chat.run("run", "--filter", "metadata.conversation=refund")
    assert whole.code == 0, whole
    _, _, rows = records(chat.root)
    assert [r["id"] for r in rows] == ["refund#1", "refund#2", "refund#3"] and all("missing" not in r for r in rows)


def test_a_large_case_file_streams_conversations_as_a_small_one_reads_them(tmp_path: Path, monkeypatch) -> None:
    import oloproof_core.config.cases as cases_module

    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS))
    held = [c.id for c in load_cases("cases.jsonl", tmp_path)]
    monkeypatch.setattr(cases_module, "HELD_BYTES", 10)  # read as a stream, checked in one pass
    stream = load_cases("cases.jsonl", tmp_path)
    assert isinstance(stream, cases_module.CaseStream)
    seen = []
    stream.check(lambda case: seen.append(case.id))
    assert seen == held and len(stream) == 6 and [c.id for c in stream] == held
    assert [[c.id for c in b] for b in whole_batches(stream, 2)] == [
        ["plain", "refund#1", "refund#2", "refund#3"], ["broken#1", "broken#2"]]


def test_a_policy_gates_on_a_conversation_criterion(chat: Project) -> None:
    chat.write("oloproof.yaml", CONFIG + POLICY.replace("answer_correct, min", '"answer_correct (all turns)", min')
               % 0.99)
    chat.cases(CONVERSATIONS[:2])  # no missing conversation, which the gate would count at both ends
    result = chat.run("run")
    # 1 of 2 observed conversations passed every turn: the exact interval [1.3%, 98.7%] is below 0.99
    assert result.code == 1, result
    assert "answer_correct (all turns)" in result.out and "FAIL" in result.out

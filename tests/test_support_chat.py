"""The conversations example, examples/support_chat: its follow-up questions are searched with the
conversation, its HTTP twin (service.py, a real aiohttp server on 127.0.0.1) and a callable give the
staged system's numbers, and a diagnosis of a failing follow-up turn labels it as the single-turn
staged example's diagnosis labels the same kind of failure."""

from __future__ import annotations

import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Project, olo

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "support_chat"
IGNORE = shutil.ignore_patterns("__pycache__", ".oloproof")


@pytest.fixture
def example(monkeypatch):
    """The example's app and service modules, imported as service.py imports app."""
    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, EXAMPLE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
        return module

    return load("app"), load("service")


def conversations() -> list[dict]:
    return [json.loads(line) for line in (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()]


def walk(service) -> dict[str, dict]:
    """Every turn of every conversation through the service's own code, in order, each turn given
    the conversation so far: turn id -> (the turn, the response body)."""
    out = {}
    for conversation in conversations():
        history: list = []
        for k, turn in enumerate(conversation["turns"], 1):
            body = service.answer(turn["input"]["question"], history)
            out[f"{conversation['id']}#{k}"] = {"turn": turn, "body": body}
            history.append({"input": turn["input"], "output": body["result"]})
    return out


def test_a_follow_up_is_searched_with_the_conversation(example):
    app, _ = example
    first = {"input": {"question": "How long does a refund take on a monthly plan?"}, "output": {}}
    assert app.rewrite("How long does a refund take on a monthly plan?", []) == \
        "How long does a refund take on a monthly plan?"
    # the follow-up's plan replaces the earlier one; the rest of the earlier question is carried
    assert app.rewrite("And for annual plans?", [first]) == "long refund take annual"
    # a question that stands on its own is searched as it is, whatever came before
    assert app.rewrite("Where is the reset link sent?", [first]) == "Where is the reset link sent?"
    # a follow-up with no earlier question has nothing to carry
    assert app.rewrite("And for annual plans?", []) == "And for annual plans?"


def test_the_cases_are_conversations_with_gold_passages_from_the_knowledge_base(example):
    app, _ = example
    rows = conversations()
    assert 20 <= len(rows) <= 30 and len({r["id"] for r in rows}) == len(rows)
    assert all(2 <= len(r["turns"]) <= 4 for r in rows) and any(len(r["turns"]) == 4 for r in rows)
    for row in rows:
        assert "input" not in row and "expected" not in row
        for turn in row["turns"]:
            gold = turn["expected"]["gold_context"]
            assert [g["doc_id"] for g in gold] == [r["doc_id"] for r in turn["expected"]["relevant"]]
            assert all(app.KNOWLEDGE_BASE[g["doc_id"]] == g["text"] for g in gold)
    flagged = [t for r in rows for t in r["turns"] if t.get("needs_history")]
    assert all(app.is_follow_up(t["input"]["question"]) for t in flagged)
    assert len(flagged) >= len(rows)  # most conversations have at least one follow-up


def test_the_planted_failures_are_of_the_staged_examples_kinds(example):
    """Where each failing turn's relevant passage was, read from what the service records: one
    follow-up whose rewrite lost its constraint (not retrieved), follow-ups whose passage was
    retrieved within top-k but left out for the budget, one answered wrongly from its passage."""
    _, service = example
    walked = walk(service)

    def correct(step):
        return step["turn"]["expected"]["answer"].casefold() in step["body"]["result"]["answer"].casefold()

    failing = sorted(turn for turn, step in walked.items() if not correct(step))
    assert failing == ["cancel-annual#2", "enterprise-support#2", "invoices#3", "refund-after-cancel#2",
                       "yearly-saving#2"]

    def evidence(turn):
        step = walked[turn]
        relevant = step["turn"]["expected"]["relevant"][0]["doc_id"]
        found = step["body"]["evidence"]
        if any(item["doc_id"] == relevant for item in found["context"]["items"]):
            return "in context"
        dropped = [d["reason"] for d in found["context"]["dropped"] if d["doc_id"] == relevant]
        return dropped[0] if dropped else "not retrieved"

    assert evidence("refund-after-cancel#2") == "not retrieved"
    assert "annual" not in walked["refund-after-cancel#2"]["body"]["evidence"]["query_rewrite"]["query"]
    assert "annual" in walked["refund-annual#2"]["body"]["evidence"]["query_rewrite"]["query"]  # a short one keeps it
    assert [evidence(t) for t in ("enterprise-support#2", "invoices#3", "yearly-saving#2")] == ["token_budget"] * 3
    assert evidence("cancel-annual#2") == "in context"
    assert all(walked[t]["turn"].get("needs_history") for t in failing)  # every failure is a follow-up


# -- end to end, through the command line --------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """A copy of the example, its service running on a free port, and its HTTP config pointing there."""
    folder = tmp_path / "support_chat"
    shutil.copytree(EXAMPLE, folder, ignore=IGNORE)
    port = free_port()
    config = folder / "oloproof.http.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("127.0.0.1:8767", f"127.0.0.1:{port}"),
                      encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "service.py", str(port)], cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
    yield Project(folder)
    proc.terminate()
    proc.wait(10)
    proc.stderr.close()


CALLABLE_TWIN = '''\
"""The service's code called in process: the conversation comes as the history parameter."""
from oloproof import current_case, system

import service


@system(name="support-chat-callable", version="conversations-example",
        records=("retrieval/v1", "context/v1", "citations/v1", "query_rewrite/v1"))
def chat(input, history):
    body = service.answer(input["question"], list(history))
    recorder = current_case()
    for kind in ("retrieval", "context", "citations", "query_rewrite"):
        recorder.record(f"{kind}/v1", body["evidence"][kind])
    return body["result"]
'''


def metric_rows(out: str) -> list[str]:
    """The report's table rows, those of the metrics and the slices."""
    return [line for line in out.splitlines() if line.startswith("│") and ("%" in line or "observed" in line)]


@pytest.mark.slow  # three runs of the example, one over HTTP
def test_over_http_and_as_a_callable_the_example_gives_the_staged_numbers(served):
    project = served
    staged = project.run("run", "--json", "staged.json")
    over_http = project.run("run", "--config", "oloproof.http.yaml", "--json", "http.json")
    project.write("callable_twin.py", CALLABLE_TWIN)
    config = (project.root / "oloproof.http.yaml").read_text(encoding="utf-8")
    head, _, tail = config.partition("cases: cases.jsonl")
    project.write("oloproof.callable.yaml", "system:\n  name: support-chat-callable\n  version: conversations-example\n"
                  "  callable: callable_twin:chat\ncases: cases.jsonl" + tail)
    as_callable = project.run("run", "--config", "oloproof.callable.yaml", "--json", "callable.json")
    assert staged.code == over_http.code == as_callable.code != 2, (staged, over_http, as_callable)
    documents = [json.loads((project.root / name).read_text(encoding="utf-8"))
                 for name in ("staged.json", "http.json", "callable.json")]
    metrics = [doc["metrics"] for doc in documents]
    assert metrics[0] == metrics[1] == metrics[2]
    assert [doc["units"]["cluster"] for doc in documents] == ["metadata.conversation"] * 3
    assert metric_rows(staged.out) == metric_rows(over_http.out) == metric_rows(as_callable.out)
    assert len(metric_rows(staged.out)) > 5
    # the service was given the conversation: its follow-ups searched with the rewritten query
    shown = project.run("inspect", documents[1]["run"]["id"], "--case", "refund-annual#2")
    assert shown.code == 0 and "long refund take annual" in shown.out, shown
    # the run's summary says how its intervals were counted, as the run printed it
    summary = project.run("inspect", documents[0]["run"]["id"])
    counted = [line for line in staged.out.splitlines() if line.startswith(("Clusters:", "First failing turn:"))]
    assert len(counted) == 4 and all(line in summary.out.splitlines() for line in counted), summary
    # diagnosed over HTTP (the gold passages as the service's override, the recorded history in the
    # body), every failing turn gets the staged system's label
    in_stages = diagnosed_lines(project, documents[0]["run"]["id"])
    over_http = diagnosed_lines(project, documents[1]["run"]["id"], "--config", "oloproof.http.yaml")
    assert over_http == in_stages and len(in_stages) == 5 + 5, (over_http, in_stages)


def diagnosed_lines(project: Project, run_id: str, *args: str) -> list[str]:
    """What ``inspect DIAGNOSIS_ID`` prints of a gold-context diagnosis of ``run_id``: a line a case."""
    out = project.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct", *args)
    assert out.code == 0 and "Recovered under gold context: 4 of 5" in out.out, out
    object_id = next(w for w in out.out.split() if w.startswith("sha256:"))
    inspected = project.run("inspect", object_id)
    assert inspected.code == 0, inspected
    return [line for line in inspected.out.splitlines() if "#" in line]


STANDALONE_KIND = {  # a failing follow-up turn of support_chat -> the support_rag case of the same kind
    "refund-after-cancel#2": "money_back",  # RETRIEVAL_MISS: the relevant passage was not retrieved
    "enterprise-support#2": "refund_review",  # CONTEXT_ASSEMBLY_LOSS: within top-k, left out for the budget
    "invoices#3": "security_review",  # CONTEXT_ASSEMBLY_LOSS, on a third turn
    "cancel-annual#2": "seat_count",  # GENERATION_FAILURE: wrong with its passage in context
}


def diagnosed(project: Project, *args: str) -> dict[str, str]:
    """Each diagnosed case's line of ``inspect DIAGNOSIS_ID``, without the case id, by case id."""
    out = project.run("diagnose", "latest", "--intervention", "gold-context", "--criterion", "answer_correct", *args)
    assert out.code == 0, out
    if args:  # a turn: re-executed with the recorded conversation, and a stable failure in the control
        assert "History: each turn was re-executed with the earlier turns recorded in the run" in out.out, out
        assert "Control: 0 of 1 passed" in out.out and "History differs" not in out.out, out
    object_id = next(w for w in out.out.split() if w.startswith("sha256:"))
    inspected = project.run("inspect", object_id)
    assert inspected.code == 0, inspected
    lines = {}
    for line in inspected.out.splitlines():
        case, sep, rest = line.strip().partition(": ")
        if sep and (case in STANDALONE_KIND or case in STANDALONE_KIND.values()):
            lines[case] = lines.get(case, "") + " | " + rest if case in lines else rest
    return lines


@pytest.mark.slow  # two runs and five diagnoses
def test_a_failing_follow_up_turn_is_labelled_as_the_single_turn_example_labels_its_kind(tmp_path):
    assert olo("init", "--example", "support_rag", "single", cwd=tmp_path).code == 0
    single = Project(tmp_path / "single")
    assert single.run("run").code in (1, 3)
    expected = diagnosed(single)
    assert olo("init", "--example", "support_chat", "chat", cwd=tmp_path).code == 0
    chat = Project(tmp_path / "chat")
    assert chat.run("run").code in (1, 3)
    for turn, standalone in STANDALONE_KIND.items():
        got = diagnosed(chat, "--case", turn)
        assert got == {turn: expected[standalone]}, (turn, got, expected[standalone])

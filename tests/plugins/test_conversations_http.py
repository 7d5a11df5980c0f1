"""A conversational HTTP service (a real server on 127.0.0.1) and a callable system run the same
conversations with the same numbers; the request carries the history at ``history_path``; the
``turn`` and ``needs_history`` slices and the ``query_rewrite/v1`` artifact."""

from __future__ import annotations

import json
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler

import pytest
from conftest import Project, Served

CASES = [
    {"id": "refund", "turns": [{"input": {"q": "refund"}, "expected": {"answer": "refund"}},
                               {"input": {"q": "annual"}, "expected": {"answer": "after: refund"}, "needs_history": True},
                               {"input": {"q": "monthly"}, "expected": {"answer": "after: annual"}, "needs_history": True}]},
    {"id": "seats", "turns": [{"input": {"q": "seats"}, "expected": {"answer": "seats"}},
                              {"input": {"q": "more"}, "expected": {"answer": "nothing"}}]},
    {"id": "alone", "input": {"q": "alone"}, "expected": {"answer": "alone"}},
]


def answer(q: str, history: list[dict]) -> dict:
    """What both systems answer: the question, and the earlier turns' questions when there are any."""
    return {"answer": q + (" after: " + " / ".join(t["input"]["q"] for t in history) if history else "")}


APP = f'''
from oloproof import system

{__import__("inspect").getsource(answer)}

@system(name="chat", version="1")
def run(input, history):
    return answer(input["q"], history)
'''


class ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.bodies.append(body)
        history = body.get("conversation", {}).get("turns", [])
        data = json.dumps(answer(body["q"], history)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


SUITE = """
system: {name: chat, version: "1", %s}
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
slices: [turn, needs_history]
"""


def summary(project: Project) -> tuple[dict, list[dict]]:
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as con:
        run_id, summary = con.execute("SELECT id, summary FROM runs ORDER BY id DESC").fetchone()
        rows = [json.loads(r[0]) for r in con.execute("SELECT record FROM run_cases WHERE run_id = ? ORDER BY idx",
                                                      (run_id,))]
    return json.loads(summary), rows


@pytest.fixture
def server():
    served = Served(ChatHandler, lock=threading.Lock(), bodies=[])
    yield served
    served.stop()


def test_a_service_and_a_function_give_the_same_numbers(project: Project, server: Served) -> None:
    project.write("app.py", APP)
    project.cases(CASES)
    project.write("oloproof.yaml", SUITE % "callable: app:run")
    local = project.run("run")
    assert local.code == 0, local
    local_summary, local_rows = summary(project)
    project.write("oloproof.yaml", SUITE % f"http: {{url: '{server.url}', history_path: conversation.turns}}")
    remote = project.run("run")
    assert remote.code == 0, remote
    remote_summary, remote_rows = summary(project)
    assert [r["output"] for r in remote_rows] == [r["output"] for r in local_rows]
    assert [r["case"] for r in remote_rows] == [r["case"] for r in local_rows]
    assert remote_summary["metrics"] == local_summary["metrics"]
    # the terminal tables alike (the run ids and the cache line aside)
    assert remote.out.splitlines()[1:-1] == local.out.splitlines()[1:-1]
    assert local_summary["metrics"]["answer_correct"]["observed"] == 3  # conversations, not turns
    assert "turn" in local.out and "needs_history" in local.out
    # the body: the case input, and the earlier turns at history_path only when there are any
    bodies = {b["q"]: b for b in server.server.bodies}
    assert bodies["refund"] == {"q": "refund"} and bodies["alone"] == {"q": "alone"}
    assert bodies["monthly"] == {"q": "monthly", "conversation": {"turns": [
        {"input": {"q": "refund"}, "output": {"answer": "refund"}},
        {"input": {"q": "annual"}, "output": {"answer": "annual after: refund"}}]}}


def test_the_turn_and_needs_history_slices(project: Project) -> None:
    project.write("app.py", APP)
    project.cases(CASES)
    project.write("oloproof.yaml", SUITE % "callable: app:run")
    result = project.run("run")
    assert result.code == 0, result
    _, rows = summary(project)
    assert [r["slices"] for r in rows] == [
        {"turn": "1", "needs_history": "false"}, {"turn": "2", "needs_history": "true"},
        {"turn": "3", "needs_history": "true"}, {"turn": "1", "needs_history": "false"},
        {"turn": "2", "needs_history": "false"}, {"turn": "1", "needs_history": "false"}]
    project.write("oloproof.yaml", (SUITE % "callable: app:run").replace("[turn,", "[turn.x,"))
    bad = project.run("run")
    assert bad.code == 2 and "slice 'turn' takes no field" in bad.err


def test_a_bad_history_path_is_a_config_error(project: Project) -> None:
    project.cases(CASES)
    project.write("oloproof.yaml", SUITE % "http: {url: 'http://127.0.0.1:9/', history_path: 'a..b'}")
    result = project.run("run")
    assert result.code == 2 and "history_path: 'a..b' is not a dotted body path" in result.err, result


def test_the_query_rewrite_artifact_checks_its_shape() -> None:
    from oloproof_query_rewrite_artifact import QueryRewriteArtifact

    from oloproof import ArtifactError

    artifact = QueryRewriteArtifact()
    assert artifact.to_data({"query": "annual plan refunds"}) == {"query": "annual plan refunds"}
    assert artifact.to_data("annual plan refunds") == {"query": "annual plan refunds"}  # a bare text is the query
    for bad, problem in (({"query": 3}, "query: expected text, got 3"), ({"q": "x"}, "q: unknown field"),
                         (["x"], "expected an object with query")):
        with pytest.raises(ArtifactError) as err:
            artifact.to_data(bad)
        assert problem in err.value.problem


def test_a_callable_records_what_it_searched_for(project: Project) -> None:
    project.write("app.py", """
        from oloproof import current_case, system

        @system(name="chat", version="1", records=["query_rewrite/v1"])
        def run(input, history):
            query = " ".join([*(t["input"]["q"] for t in history), input["q"]])
            current_case().record("query_rewrite/v1", {"query": query})
            return {"answer": query}
    """)
    project.cases(CASES[:1])
    project.write("oloproof.yaml", SUITE % "callable: app:run")
    assert project.run("run").code == 0
    _, rows = summary(project)
    assert [r["artifacts"]["query_rewrite/v1"] for r in rows] == [
        [{"query": "refund"}], [{"query": "refund annual"}], [{"query": "refund annual monthly"}]]

"""The ``http`` system through the real CLI, against real servers on 127.0.0.1.

Each server runs in a thread of the test process on a free port: the blackbox_rag example's
server.py, and a fault-injecting one whose behaviour each case's input picks (``mode``): slow,
500 then success, 429 with Retry-After, truncated JSON, connection reset, always 503, 404, or a
given ``reply`` body. The server counts every attempt, so the tests see the retries themselves.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from conftest import Project, Served

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "blackbox_rag"
SECRET = "s3cr3t-token-6f1e9d"


class FaultHandler(BaseHTTPRequestHandler):
    """Answers ``{"answer": q}`` unless the case's ``mode`` asks for a fault."""

    protocol_version = "HTTP/1.1"
    timeout = 10  # a handler thread never waits on an idle connection for longer
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between them

    def do_POST(self) -> None:
        state = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = body["q"]
        with state.lock:
            attempt = len(state.attempts.setdefault(key, []))
            state.attempts[key].append(time.monotonic())
            state.seen_headers.append({k.lower(): v for k, v in self.headers.items()})
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            self.respond(body.get("mode", "ok"), attempt, body)
        finally:
            with state.lock:
                state.in_flight -= 1

    def respond(self, mode: str, attempt: int, body: dict) -> None:
        ok = {"answer": body["q"], "evidence": {"n": 1}}
        if mode == "slow":
            time.sleep(0.6)
            return self.reply(200, ok)
        if mode == "flaky500" and attempt == 0:
            return self.reply(500, {"error": "boom"})
        if mode == "ratelimited" and attempt == 0:
            return self.reply(429, {"error": "slow down"}, {"Retry-After": "1"})
        if mode == "truncated":
            return self.reply(200, raw=b'{"answer": "tru')
        if mode == "resets" or (mode == "reset" and attempt == 0):  # RST: close with a zero linger time
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return None
        if mode == "close" and attempt == 0:  # FIN without a response
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return None
        if mode == "down":
            return self.reply(503, {"error": "unavailable"})
        if mode == "notfound":
            return self.reply(404, {"error": "no such route"})
        if mode == "reply":
            return self.reply(200, body["reply"])
        time.sleep(self.server.delay)
        return self.reply(200, ok)

    def reply(self, status: int, payload: object = None, headers: dict | None = None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        pass


def serve_faults() -> Served:
    return Served(FaultHandler, lock=threading.Lock(), attempts={}, seen_headers=[], in_flight=0, max_in_flight=0,
                  delay=0.0)


@pytest.fixture
def fault_server():
    served = serve_faults()
    yield served
    served.stop()


def http_config(url: str, extra: str = "", top: str = "") -> str:
    return f"""
system:
  name: faulty
  version: "1"
  http:
    url: {url}
    output_path: answer
    backoff: 0.01
{extra}cases: cases.jsonl
evaluators:
  - {{type: contains, criterion: answer_correct, expected_field: answer}}
{top}"""


def http_case(name: str, **input_) -> dict:
    return {"id": name, "input": {"q": f"answer {name}", **input_}, "expected": {"answer": f"answer {name}"}}


def run_id(result) -> str:
    return next(word for word in result.out.split() if word.startswith("run_"))


def exported(project: Project, run: str) -> dict[str, dict]:
    result = project.run("export", run)
    assert result.code == 0, result
    lines = (project.root / ".oloproof" / "bundles" / run / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


# -- the example's server ------------------------------------------------------------------------


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example_server(monkeypatch):
    monkeypatch.setitem(sys.modules, "app", load("app", EXAMPLE / "app.py"))  # what server.py imports
    served = Served(load("blackbox_rag_server", EXAMPLE / "server.py").Handler)
    yield served
    served.stop()


@pytest.mark.slow  # two runs of the example
def test_example_server_gives_the_documented_table(tmp_path, example_server):
    folder = tmp_path / "blackbox_rag"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".oloproof"))
    config = folder / "oloproof.http.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("http://127.0.0.1:8766/answer", example_server.url),
                      encoding="utf-8")
    project = Project(folder)
    over_http = project.run("run", "--config", "oloproof.http.yaml")
    assert over_http.code == 1, over_http
    assert "Gate: BLOCK (exit 1)" in over_http.out
    table = [line for line in over_http.out.splitlines() if line.startswith("│ answer_correct")]
    assert "73.3%" in table[0] and "[44.8%, 92.3%]" in table[0] and "11 / 15 observed" in table[0]
    assert "Cache: execution 0 hit/15 miss; judgment 0 hit/56 miss" in over_http.out
    # the callable variant prints the same metrics, gate and slices
    in_process = project.run("run")
    assert in_process.code == 1, in_process
    metrics = lambda text: [line for line in text.splitlines() if line.startswith(("│", "Gate"))]  # noqa: E731
    assert metrics(in_process.out) == metrics(over_http.out)


# -- faults -----------------------------------------------------------------------------------------

FAULTS = ["ok", "slow", "flaky500", "ratelimited", "truncated", "reset", "resets", "close", "down", "notfound"]
POLICY = """policy:
  version: 1
  rules:
    - {id: no-failures, metric: answer_correct, kind: observed_count, max_failures: 0}
concurrency: 16
"""


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """One run over a case per fault mode; every test below reads its own case."""
    served = serve_faults()
    try:
        project = Project(tmp_path_factory.mktemp("faults"))
        project.write("oloproof.yaml", http_config(served.url, "    timeout: 0.3\n    retries: 2\n", POLICY))
        project.cases([http_case(mode, mode=mode) for mode in FAULTS])
        result = project.run("run")
        records = exported(project, run_id(result))
    finally:
        served.stop()
    return {"result": result, "records": records, "attempts": served.server.attempts}


@pytest.mark.slow  # the module's fault run waits out timeouts and a Retry-After
@pytest.mark.parametrize(("mode", "missing", "attempts"), [
    ("ok", None, 1),
    ("slow", "timeout", 3),  # beyond `timeout` on every attempt
    ("flaky500", None, 2),  # a 500 is retried
    ("ratelimited", None, 2),  # a 429 is retried
    ("truncated", "invalid_json", 3),  # a 200 whose body is not JSON is retried
    ("reset", None, 2),  # a connection reset is retried
    ("resets", "connection_error: ClientOSError", 3),  # reset on every attempt: errno 104
    ("close", None, 2),  # so is a connection closed without a response
    ("down", "http_error: 503", 3),  # still 503 after the retries: missing, the run goes on
    ("notfound", "http_error: 404", 1),  # a 404 is not retried
])
def test_fault_outcome(faults, mode, missing, attempts):
    record = faults["records"][mode]
    got = record.get("missing")
    if missing is not None and missing.startswith("connection_error: "):  # the URL follows: which service
        assert got is not None and re.fullmatch(re.escape(missing) + r" \(http://127\.0\.0\.1:\d+/\S*\)", got), record
    else:
        assert got == missing, record
    if missing is None:
        assert record["judgments"]["answer_correct"]["status"] == "pass", record
    assert len(faults["attempts"][f"answer {mode}"]) == attempts


@pytest.mark.slow
def test_missing_cases_reach_the_gate_as_the_core_decides(faults):
    result = faults["result"]
    # 5 passes observed, 5 missing: an observed_count rule cannot pass while they could be failures
    assert result.code == 3, result
    assert "Gate: BLOCK (exit 3)" in result.out
    assert "missing_cases_could_exceed_limit" in result.out
    assert "5 / 5 observed · 5 missing · 0 excluded" in result.out


@pytest.mark.slow
def test_retry_after_is_waited_instead_of_the_backoff(faults):
    first, second = faults["attempts"]["answer ratelimited"]
    assert 0.9 <= second - first < 3.0
    first, second = faults["attempts"]["answer flaky500"]
    assert second - first < 0.5  # backoff 0.01 s with jitter


@pytest.mark.slow
def test_refused_connection_is_missing_after_retries(project):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    project.write("oloproof.yaml", http_config(f"http://127.0.0.1:{port}/answer", "    retries: 1\n"))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 0, result  # no policy: the run is ungated, the case missing
    assert "0 / 0 observed · 1 missing" in result.out
    missing = f"connection_error: ClientConnectorError (http://127.0.0.1:{port}/answer)"
    assert exported(project, run_id(result))["c1"]["missing"] == missing
    # the report names the service that was down
    assert f"Missing: 1 of 1 cases produced no output: {missing} (1)" in result.out, result.out
    secret = http_config(f"http://user:pw@127.0.0.1:{port}/answer?token=abc", "    retries: 0\n")
    project.write("oloproof.yaml", secret)
    shown = project.run("run")
    assert missing in shown.out and "pw" not in shown.out and "abc" not in shown.out, shown.out


# -- the response's fields ----------------------------------------------------------------------------


def test_missing_output_path_stops_the_run(project, fault_server):
    project.write("oloproof.yaml", http_config(fault_server.url).replace("output_path: answer", "output_path: result"))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 2, result
    assert result.err.splitlines() == [
        "error: case 'c1': output_path: the response has no field 'result'; the response is an object with keys "
        "['answer', 'evidence']; fix: point output_path at the answer"]
    assert project.runs() == []


def test_a_bad_response_among_many_in_flight_stops_the_run_cleanly(project, fault_server):
    fault_server.server.delay = 0.05  # the other cases are in flight when c07's response arrives
    project.write("oloproof.yaml", http_config(fault_server.url, "", "concurrency: 16\n"))
    project.cases([http_case(f"c{i:02d}", **({"mode": "reply", "reply": [1, 2]} if i == 7 else {}))
                   for i in range(40)])
    result = project.run("run")
    assert result.code == 2, result
    assert result.err.splitlines() == [  # one line: no warning about unclosed sessions or pending tasks
        "error: case 'c07': output_path: the response has no field 'answer'; the response is a list of 2 items; "
        "fix: point output_path at the answer"]
    assert project.runs() == []


def test_missing_artifact_field_stops_the_run(project, fault_server):
    project.write("oloproof.yaml", http_config(fault_server.url, "    artifacts: {retrieval/v1: evidence.retrieval}\n"))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 2, result
    assert result.err.splitlines() == [
        "error: case 'c1': artifacts.retrieval/v1: the response has no field 'evidence.retrieval'; "
        "evidence is an object with keys ['n']; fix: point artifacts.retrieval/v1 at it"]
    assert project.runs() == []


def test_malformed_artifact_stops_the_run(project, fault_server):
    project.write("oloproof.yaml", http_config(fault_server.url, "    artifacts: {retrieval/v1: evidence.retrieval}\n"))
    reply = {"answer": "answer c1", "evidence": {"retrieval": {"depth": 2, "candidates": [{"score": 0.5}]}}}
    project.cases([http_case("c1", mode="reply", reply=reply)])
    result = project.run("run")
    assert result.code == 2, result
    [line] = result.err.splitlines()
    assert line == ("error: case 'c1': malformed retrieval/v1 (from response field evidence.retrieval): "
                    "candidates[0].doc_id: missing; fix: give every candidate a doc_id"), line
    assert project.runs() == []


# -- secrets ------------------------------------------------------------------------------------------

SECRET_HEADERS = '    headers: {Authorization: "Bearer ${TEST_API_KEY}"}\n'


@pytest.mark.slow
def test_header_from_environment_reaches_the_server_and_nothing_else(project, fault_server):
    project.write("oloproof.yaml", http_config(fault_server.url, SECRET_HEADERS))
    project.cases([http_case(f"c{i}") for i in range(3)])
    result = project.run("run", env={"TEST_API_KEY": SECRET})
    assert result.code == 0, result
    assert {h["authorization"] for h in fault_server.server.seen_headers} == {f"Bearer {SECRET}"}
    exported(project, run_id(result))
    shown = project.run("inspect", run_id(result), "--case", "c0")
    files = [p for p in (project.root / ".oloproof").rglob("*") if p.is_file()]
    assert any(p.name == "cases.jsonl" for p in files) and any(p.suffix == ".db" for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in result.text + shown.text


def test_unset_header_variable_stops_before_anything_runs(project, fault_server, monkeypatch):
    monkeypatch.delenv("TEST_API_KEY", raising=False)
    project.write("oloproof.yaml", http_config(fault_server.url, SECRET_HEADERS))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 2, result
    [line] = result.err.splitlines()
    assert "header Authorization uses ${TEST_API_KEY}, but the environment variable TEST_API_KEY is not set" in line
    assert "fix: export TEST_API_KEY=" in line
    assert project.runs() == [] and fault_server.server.attempts == {}


# -- limits -------------------------------------------------------------------------------------------


@pytest.mark.slow  # one second by design
def test_requests_per_second_spaces_the_requests(project, fault_server):
    project.write("oloproof.yaml", http_config(fault_server.url, "    requests_per_second: 20\n", "concurrency: 8\n"))
    project.cases([http_case(f"c{i:02d}") for i in range(20)])
    result = project.run("run")
    assert result.code == 0, result
    starts = sorted(t for times in fault_server.server.attempts.values() for t in times)
    assert len(starts) == 20
    assert starts[-1] - starts[0] >= 0.85  # 19 gaps of 50 ms, less the first connection's set-up
    # the server stamps arrivals, which a loaded machine can bunch; most gaps still show the spacing
    gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
    assert gaps[len(gaps) // 2] > 0.03


@pytest.mark.slow
def test_concurrency_caps_requests_in_flight(project, fault_server):
    fault_server.server.delay = 0.05
    project.write("oloproof.yaml", http_config(fault_server.url, "    concurrency: 2\n", "concurrency: 16\n"))
    project.cases([http_case(f"c{i:02d}") for i in range(20)])
    result = project.run("run")
    assert result.code == 0, result
    assert fault_server.server.max_in_flight == 2


# -- options ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("extra", "problem"), [
    ("    timeout: 0\n", "timeout must be positive, got 0.0; fix: write timeout: 10"),
    ("    retries: -1\n", "retries must be at least 0, got -1; fix: write retries: 0"),
    ("    method: GET\n", "method 'GET' cannot carry the case input as a JSON body; fix: use POST, PUT or PATCH"),
])
def test_bad_option_is_a_config_error(project, extra, problem):
    project.write("oloproof.yaml", http_config("http://127.0.0.1:9/answer", extra))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 2, result
    [line] = result.err.splitlines()
    assert line.startswith("error: oloproof.yaml:") and line.endswith(problem), line
    assert project.runs() == []


def test_retry_after_reads_seconds_and_http_dates():
    from email.utils import formatdate

    from oloproof import retry_after

    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "-3"}) == 0.0
    assert 8.0 <= retry_after({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10.0
    assert retry_after({"retry-after": formatdate(time.time() - 60, usegmt=True)}) == 0.0
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_failure_reasons_name_what_happened():
    import httpx

    from oloproof_http import failure

    def mapped(cause: BaseException, kind: type) -> BaseException:  # as the aiohttp transport raises them
        try:
            raise kind(str(cause)) from cause
        except kind as exc:
            return exc

    assert failure(TimeoutError()) == "timeout"
    assert failure(httpx.ReadTimeout("slow")) == "timeout"
    assert failure(mapped(ConnectionResetError(104, "reset"), httpx.ConnectTimeout)) == \
        "connection_error: ConnectionResetError"
    assert failure(httpx.ConnectError("refused")) == "connection_error: ConnectError"

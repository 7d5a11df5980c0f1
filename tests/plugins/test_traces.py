"""``traces: otlp``: a traced service's spans become its cases' artifacts.

The traced_rag example's service (aiohttp, the real OpenTelemetry SDK, a BatchSpanProcessor and
the OTLP/HTTP exporter, OpenInference attributes) runs in a thread of the test process on a free
port of 127.0.0.1 and exports to the run's receiver on a fixed free port. The same service also
returns its evidence in the response body, so one suite reads the body and the other the spans,
and their retrieval metrics and artifacts must agree, in both OTLP encodings.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest

from conftest import Project

pytest.importorskip("opentelemetry.sdk")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "traced_rag"
BLACKBOX = ROOT / "examples" / "blackbox_rag"
DROPPED = "Where can I download invoices?"


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Dropping:
    """An exporter that loses every span of the traces whose question is ``DROPPED`` (and all of
    them once ``off``)."""

    def __init__(self, inner):
        self.inner, self.lost, self.off = inner, set(), False

    def export(self, spans):
        if self.off:  # the receiver is gone: exporting would only retry
            from opentelemetry.sdk.trace.export import SpanExportResult

            return SpanExportResult.SUCCESS
        self.lost |= {s.context.trace_id for s in spans if s.attributes.get("input.value") == DROPPED}
        return self.inner.export([s for s in spans if s.context.trace_id not in self.lost])

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return True


class Service:
    """The example's aiohttp app in a thread with its own event loop."""

    def __init__(self, server, provider):
        from aiohttp import web

        self.provider, started = provider, threading.Event()
        self.loop = asyncio.new_event_loop()

        async def start():
            self.runner = web.AppRunner(server.make_app(provider), access_log=None)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]

        def serve():
            self.loop.run_until_complete(start())
            started.set()
            self.loop.run_forever()
            self.loop.run_until_complete(self.runner.cleanup())
            self.loop.close()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        started.wait(10)
        self.url = f"http://127.0.0.1:{self.port}/answer"

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.provider.shutdown()


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    # the service imports `app` when it answers: the blackbox example's, whatever module an earlier
    # test left under that name
    earlier = sys.modules.get("app")
    sys.modules["app"] = load("app", BLACKBOX / "app.py")
    server = load("traced_rag_server", EXAMPLE / "server.py")
    folder = tmp_path_factory.mktemp("examples")
    for name in ("traced_rag", "blackbox_rag"):
        shutil.copytree(ROOT / "examples" / name, folder / name,
                        ignore=shutil.ignore_patterns("__pycache__", ".oloproof"))
    yield server, folder / "traced_rag"
    if earlier is None:
        sys.modules.pop("app", None)
    else:
        sys.modules["app"] = earlier


def configure(folder: Path, name: str, url: str, port: int | None = None, grace: float = 5) -> None:
    text = (EXAMPLE / name).read_text(encoding="utf-8").replace("http://127.0.0.1:8767/answer", url)
    if port is not None:
        text = text.replace("otlp: {port: 4318, grace: 5}", f"otlp: {{port: {port}, grace: {grace}}}")
    (folder / name).write_text(text, encoding="utf-8")


def run_id(result) -> str:
    return next(word for word in result.out.split() if word.startswith("run_"))


def records(project: Project, result) -> dict[str, dict]:
    run = run_id(result)
    exported = project.run("export", run)
    assert exported.code == 0, exported
    lines = (project.root / ".oloproof" / "bundles" / run / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def metric_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("│")]


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_spans_give_the_same_artifacts_and_metrics_as_the_body(example, protocol):
    server, folder = example
    port = free_port()
    exporter = Dropping(server.exporter_for(f"http://127.0.0.1:{port}", protocol))
    service = Service(server, server.tracer_provider(exporter, schedule_delay_millis=50))
    try:
        configure(folder, "oloproof.body.yaml", service.url)
        configure(folder, "oloproof.yaml", service.url, port, grace=8)  # a loaded machine exports late
        project = Project(folder)
        traced = project.run("run")
        assert traced.code == 0, traced
        if protocol == "http/protobuf":  # diagnose re-executes the failed cases through the override, traced again
            traced_labels = labels_of(project, run_id(traced), "oloproof.yaml")
        exporter.off = True
        body = project.run("run", "--config", "oloproof.body.yaml")
        assert body.code == 0, body
        if protocol == "http/protobuf":  # the same labels as the same service's evidence in its body
            assert traced_labels == labels_of(project, run_id(body), "oloproof.body.yaml")
            assert "Recovered under gold context: 3 of 4" in traced_labels, traced_labels
            assert any(line.startswith("CONTEXT_ASSEMBLY_LOSS: 2 of 4") for line in traced_labels), traced_labels
    finally:
        service.stop()
    assert f"Traces: otlp receiver on http://127.0.0.1:{port}/v1/traces;" in traced.out
    assert "ignored (no Oloproof trace id)" in traced.out
    from_body, from_spans = records(project, body), records(project, traced)
    assert set(from_body) == set(from_spans)
    dropped = next(i for i, r in from_body.items() if r["input"]["question"] == DROPPED)
    for case_id, expected in from_body.items():
        got = from_spans[case_id]
        assert got["output"] == expected["output"]
        if case_id == dropped:  # its spans never came: every artifact criterion is missing, the answer judged
            assert got["unrecorded"] == "no_trace_spans"
            for criterion in ("hit_rate_at_2", "recall_at_2", "citations_valid"):
                judgment = got["judgments"][criterion]
                assert (judgment["status"], judgment["reason"]) == ("missing", "no_trace_spans"), got["judgments"]
            assert got["judgments"]["answer_correct"]["status"] == expected["judgments"]["answer_correct"]["status"]
            continue
        assert got["artifacts"]["retrieval/v1"] == expected["artifacts"]["retrieval/v1"]
        assert got["artifacts"]["citations/v1"] == expected["artifacts"]["citations/v1"]
        ctx, want = got["artifacts"]["context/v1"][-1], expected["artifacts"]["context/v1"][-1]
        assert [(i["doc_id"], i["position"], i["text"]) for i in ctx["items"]] == \
            [(i["doc_id"], i["position"], i["text"]) for i in want["items"]]
        assert [(d["doc_id"], d["position"]) for d in ctx["dropped"]] == \
            [(d["doc_id"], d["position"]) for d in want["dropped"]]
        usage = got["artifacts"]["usage/v1"][-1]
        assert usage["tokens"]["total"] > 0 and {"retriever", "llm", "chain"} <= set(usage["stages"])
        assert {k: j["status"] for k, j in got["judgments"].items()} == \
            {k: j["status"] for k, j in expected["judgments"].items()}
    # the retrieval metrics over the cases that have spans are the body's over the same cases
    assert "hit_rate_at_2" in "\n".join(metric_rows(traced.out))


# -- a callable system, the receiver on a free port ------------------------------------------------

TRACED_APP = '''
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from oloproof import system

# built when Oloproof imports this module: the receiver already listens, and
# OTEL_EXPORTER_OTLP_ENDPOINT names it
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(), schedule_delay_millis=50))
tracer = provider.get_tracer("app")

DOCS = {"d1": "alpha text", "d2": "beta text", "d3": "gamma text"}

@system(name="traced", version="1")
def run(input):
    with tracer.start_as_current_span("answer"):
        if input.get("untraced"):
            return {"answer": "none"}
        with tracer.start_as_current_span("search") as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            for i, doc in enumerate(input["docs"]):
                span.set_attribute(f"retrieval.documents.{i}.document.id", doc)
                span.set_attribute(f"retrieval.documents.{i}.document.content", DOCS[doc])
        with tracer.start_as_current_span("llm") as span:
            span.set_attributes({"openinference.span.kind": "LLM",
                                 "llm.input_messages.0.message.content": DOCS[input["docs"][0]],
                                 "llm.token_count.prompt": 7})
    return {"answer": input["docs"][0]}
'''


@pytest.fixture
def traced_project(project):
    project.write("app.py", TRACED_APP)
    project.cases([
        {"id": "a", "input": {"docs": ["d1", "d2"]}, "expected": {"answer": "d1", "relevant": [{"doc_id": "d1"}]}},
        {"id": "b", "input": {"docs": ["d3", "d1"]}, "expected": {"answer": "d3", "relevant": [{"doc_id": "d1"}]}},
        {"id": "c", "input": {"docs": ["d2"], "untraced": True},
         "expected": {"answer": "none", "relevant": [{"doc_id": "d2"}]}},
    ])
    return project


CALLABLE = """
system:
  name: traced
  version: "1"
  callable: app:run
traces:
  otlp: {grace: 1}
  mappings: [openinference]
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
  - {type: hit_rate, k: 1}
"""


def test_a_callable_system_exports_to_the_free_port_and_its_spans_join_the_case(traced_project):
    traced_project.write("oloproof.yaml", CALLABLE)
    result = traced_project.run("run")
    assert result.code == 0, result
    assert "Traces: otlp receiver on http://127.0.0.1:" in result.out
    got = records(traced_project, result)
    assert [c["doc_id"] for c in got["a"]["artifacts"]["retrieval/v1"][0]["candidates"]] == ["d1", "d2"]
    assert got["a"]["judgments"]["hit_rate_at_1"]["status"] == "pass"
    assert got["b"]["judgments"]["hit_rate_at_1"]["status"] == "fail"  # order as recorded, never re-sorted
    assert got["a"]["artifacts"]["context/v1"][0]["items"] == [{"doc_id": "d1", "position": 1, "text": "alpha text"}]
    assert got["a"]["artifacts"]["usage/v1"][0]["tokens"] == {"prompt": 7}
    # spans came, but none a mapping reads: the mapping says which it saw
    assert got["c"]["judgments"]["hit_rate_at_1"]["status"] == "missing"
    assert got["c"]["judgments"]["hit_rate_at_1"]["reason"] == (
        "no_mapped_spans: openinference found nothing in 1 spans (answer)")
    assert got["c"]["judgments"]["answer_correct"]["status"] == "pass"


# -- the receiver alone: both encodings, strangers' spans, configuration errors -----------------------


def _request(trace_id: bytes, parent: bytes, name: str = "root"):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.parent_span_id, span.name = trace_id, b"\x01" * 8, parent, name
    attribute = span.attributes.add()
    attribute.key, attribute.value.string_value = "input.value", "q"
    return request


def _post(url: str, body: bytes, content_type: str) -> int:
    import urllib.request

    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status


def test_receiver_files_both_encodings_and_counts_spans_of_no_case():
    from google.protobuf.json_format import MessageToDict

    import oloproof_otlp as otlp

    receiver = otlp.Receiver(otlp.Options(grace=0.5), {})
    try:
        mine, theirs = receiver.open(), receiver.open()
        mine_id, parent = bytes.fromhex(mine.trace_id), bytes.fromhex(mine.span_id)
        assert _post(receiver.endpoint, _request(mine_id, parent).SerializeToString(), "application/x-protobuf") == 200
        as_json = MessageToDict(_request(bytes.fromhex(theirs.trace_id), b"", "child"))
        span = as_json["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        span["traceId"], span["spanId"] = theirs.trace_id, "01" * 8  # OTLP/JSON: hex ids
        assert _post(receiver.endpoint, json.dumps(as_json).encode(), "application/json") == 200
        assert _post(receiver.endpoint, _request(b"\x07" * 16, b"").SerializeToString(), "application/x-protobuf") == 200
        receiver.wait(mine)  # its entry span came: no waiting
        assert mine.complete and not theirs.complete
        assert receiver.describe()["ignored"] == 1 and receiver.describe()["spans"] == 2
        spans = receiver.forget(mine)  # the case's spans, as the span mappings read them
        assert [s["name"] for s in spans] == ["root"] and spans[0]["attributes"] == {"input.value": "q"}
        assert [s["name"] for s in receiver.forget(theirs)] == ["child"]
    finally:
        receiver.close()


def _span(name: str, start: int, end: int, **attributes) -> dict:
    return {"trace_id": "ab" * 16, "span_id": f"{start:016x}", "parent_span_id": None, "name": name,
            "kind": "internal", "start_ns": start, "end_ns": end, "attributes": attributes, "events": []}


def test_openinference_reads_indexed_attributes_in_their_numbers_order():
    from oloproof_openinference import OpenInference

    documents = {f"retrieval.documents.{n}.document.{field}": value
                 for n in (10, 2, 9) for field, value in (("id", f"kb-{n}"), ("score", float(n)),
                                                          ("content", f"Passage {n}."))}
    retriever = _span("retrieve", 1, 3, **documents, **{
        "input.value": "q", "retrieval.documents.x.document.id": "no number",
        "retrieval.documents.3": "no field", "retrieval.documentsX.4.document.id": "another prefix",
        "retrieval.documents.4.document.score": 0.5})  # no id: not a candidate
    llm = _span("generate", 4, 6, **{
        "llm.input_messages.1.message.content": "Passage 9. and Passage 10.",
        "llm.input_messages.0.message.content": "Answer from:", "llm.token_count.prompt": 7,
        "llm.token_count.total": 9, "llm.token_count.completion": True})  # not a count
    chain = _span("POST /answer", 0, 8, **{"openinference.span.kind": "chain", "output.citations": ["kb-9", 10]})
    recorded = dict(OpenInference().map([chain, retriever, llm]))
    assert [c["doc_id"] for c in recorded["retrieval/v1"]["candidates"]] == ["kb-2", "kb-9", "kb-10"]
    assert recorded["retrieval/v1"]["candidates"][0] == {"doc_id": "kb-2", "score": 2.0, "text": "Passage 2."}
    assert recorded["retrieval/v1"]["query"] == "q" and recorded["retrieval/v1"]["depth"] == 3
    context = recorded["context/v1"]
    assert [(i["doc_id"], i["position"]) for i in context["items"]] == [("kb-9", 2), ("kb-10", 3)]
    assert [(d["doc_id"], d["reason"]) for d in context["dropped"]] == [("kb-2", "not_in_prompt")]
    assert recorded["usage/v1"]["tokens"] == {"prompt": 7, "total": 9}
    assert set(recorded["usage/v1"]["stages"]) == {"chain", "retriever", "llm"}
    assert recorded["citations/v1"] == {"ids": ["kb-9", "10"]}


def test_receiver_answers_what_it_cannot_take_and_goes_on():
    """A body it cannot decode is 400, one over max_request_bytes 413, another path 404, a gzip
    body is read; none of them stops the receiver, and a good export after them is filed."""
    import gzip
    import urllib.error

    import oloproof_otlp as otlp

    receiver = otlp.Receiver(otlp.Options(grace=0.5, max_request_bytes=10_000), {})
    try:
        mine = receiver.open()
        body = _request(bytes.fromhex(mine.trace_id), bytes.fromhex(mine.span_id)).SerializeToString()
        for url, data, status in ((receiver.endpoint, b"\xff\x00 not protobuf", 400),
                                  (receiver.endpoint, b"x" * 10_001, 413),
                                  (receiver.endpoint.replace("/v1/traces", "/v1/metrics"), body, 404)):
            with pytest.raises(urllib.error.HTTPError) as error:
                _post(url, data, "application/x-protobuf")
            assert error.value.code == status
            error.value.close()
        import urllib.request

        request = urllib.request.Request(receiver.endpoint, data=gzip.compress(body), method="POST",
                                         headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
        receiver.wait(mine)
        assert mine.complete and [s["name"] for s in receiver.forget(mine)] == ["root"]
    finally:
        receiver.close()
    assert not receiver.thread.is_alive()


def _exchange(sock: socket.socket, data: bytes, answers: int = 1) -> list[bytes]:
    """Send ``data`` and read ``answers`` HTTP answers (head and body) off ``sock``."""
    sock.sendall(data)
    got, buffer = [], b""
    while len(got) < answers:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            head = buffer[:end]
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if len(buffer) >= end + 4 + length:
                got.append(buffer[:end + 4 + length])
                buffer = buffer[end + 4 + length:]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        buffer += chunk
    return got


def test_receiver_answers_http_as_an_exporter_or_a_collector_sends_it():
    """Requests kept on one connection (and pipelined) are answered in turn; ``Expect:
    100-continue`` gets its interim answer; a GET is 405, a chunked body 411 and a malformed
    request 400, the last two closing the connection; ``Connection: close`` is honoured."""
    import oloproof_otlp as otlp

    receiver = otlp.Receiver(otlp.Options(grace=0.5), {})
    try:
        first, second = receiver.open(), receiver.open()
        bodies = [_request(bytes.fromhex(p.trace_id), bytes.fromhex(p.span_id)).SerializeToString()
                  for p in (first, second)]

        def post(body: bytes, extra: str = "") -> bytes:
            return (f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                    f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body

        with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
            answers = _exchange(sock, post(bodies[0]) + b"GET /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n", 2)
            assert answers[0].startswith(b"HTTP/1.1 200 OK\r\n")
            assert answers[1].startswith(b"HTTP/1.1 405 ") and b"Allow: POST" in answers[1]
            head = post(bodies[1], "Expect: 100-continue\r\n")
            answers = _exchange(sock, head, 2)
            assert answers[0] == b"HTTP/1.1 100 Continue\r\n\r\n" and answers[1].startswith(b"HTTP/1.1 200 ")
            answers = _exchange(sock, post(b"", "Connection: close\r\n"), 1)
            assert answers[0].startswith(b"HTTP/1.1 200 ") and b"Connection: close" in answers[0]
            assert sock.recv(1) == b""  # closed by the receiver
        assert first.complete and second.complete
        for request, status in ((b"POST /v1/traces HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", b"411"),
                                (b"nonsense\r\n\r\n", b"400")):
            with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
                answers = _exchange(sock, request, 1)
                assert answers[0].startswith(b"HTTP/1.1 " + status) and b"Connection: close" in answers[0]
                assert sock.recv(1) == b""
        assert receiver.describe()["requests"] == 3
    finally:
        receiver.close()


def test_the_spans_of_an_opaque_system_are_received_on_the_runs_event_loop():
    """Once an opaque asynchronous system (a service in another process) runs, new connections
    are served on the run's event loop, where its cases wait; a connection the receiver's thread
    already had is still served there; closing on the loop ends both."""
    import http.client

    import oloproof_otlp as otlp

    receiver = otlp.Receiver(otlp.Options(grace=5), {})
    before, after = receiver.open(), receiver.open()

    def post(connection, pending) -> int:
        body = b"" if pending is None else _request(bytes.fromhex(pending.trace_id),
                                                    bytes.fromhex(pending.span_id)).SerializeToString()
        connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        response = connection.getresponse()
        response.read()
        return response.status

    early = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
    assert post(early, None) == 200  # an export with no spans: served by the thread, before the run's loop

    async def run() -> None:
        server = receiver.server
        await server.serve_here()
        assert server.here[0] is asyncio.get_running_loop()
        late = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
        for connection, pending in ((late, after), (early, before)):
            waiting = asyncio.ensure_future(receiver.await_spans(pending))
            await asyncio.sleep(0)  # waiting on its future
            assert await asyncio.to_thread(post, connection, pending) == 200
            assert pending.waiter[1].done()  # woken when its spans were filed, not by the grace period
            await waiting
            assert len(server.here[2]) == 1  # the new connection, on this loop
            assert len(server.connections) == 1  # the early one stayed with the thread
        late.close()
        await receiver.aclose()

    try:
        asyncio.run(run())
    finally:
        early.close()
        receiver.close()
    assert before.complete and after.complete
    assert not receiver.thread.is_alive() and receiver.server.here is None


def test_a_busy_fixed_port_is_a_config_error(project):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        project.write("app.py", "from oloproof import system\n@system(name='e', version='1')\ndef run(i):\n    return i\n")
        project.cases([{"id": "a", "input": {"answer": "x"}, "expected": {"answer": "x"}}])
        project.write("oloproof.yaml", CALLABLE.replace("otlp: {grace: 1}", f"otlp: {{port: {port}}}"))
        result = project.run("run")
    assert result.code == 2, result
    assert f"the OTLP receiver cannot listen on 127.0.0.1:{port}" in result.text
    assert "oloproof.yaml" in result.text


def test_an_unknown_receiver_names_the_known_ones(project):
    project.write("app.py", "from oloproof import system\n@system(name='e', version='1')\ndef run(i):\n    return i\n")
    project.cases([{"id": "a", "input": {"answer": "x"}, "expected": {"answer": "x"}}])
    project.write("oloproof.yaml", CALLABLE.replace("  otlp: {grace: 1}\n", "  zipkin: {}\n"))
    result = project.run("run")
    assert result.code == 2, result
    assert "zipkin" in result.text and "otlp" in result.text


# -- production traces as cases -----------------------------------------------------------------------


def _production_cases(example) -> tuple[list, dict, Project]:
    """Production traffic to the traced example (its own traces, no traceparent) exported to a
    file, and `cases from-traces` on that file: the questions, the service's replies, the project."""
    import urllib.request

    server, folder = example
    spans_file = folder / "spans.jsonl"
    spans_file.unlink(missing_ok=True)
    service = Service(server, server.tracer_provider(server.OTLPJsonFileExporter(str(spans_file)), 50))
    questions = [json.loads(line)["input"]["question"]
                 for line in (BLACKBOX / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    answers = {}
    try:
        for question in questions:  # production traffic: no traceparent, the service's own traces
            request = urllib.request.Request(service.url, data=json.dumps({"question": question}).encode(),
                                             headers={"Content-Type": "application/json", "X-User": "u"})
            with urllib.request.urlopen(request, timeout=10) as response:
                answers[question] = json.loads(response.read())
    finally:
        service.stop()  # flushes the batch processor into the file
    project = Project(folder)
    made = project.run("cases", "from-traces", "spans.jsonl", "-o", "cases.from-traces.jsonl",
                       "--redact", "llm.output_messages.*", "--mapping", "openinference")
    assert made.code == 0, made
    assert f"Wrote {len(questions)} cases to cases.from-traces.jsonl from {len(questions)} traces" in made.out
    return questions, answers, project


def test_cases_from_traces_keep_the_question_the_answer_and_the_retrieval_to_replay(example):
    questions, answers, project = _production_cases(example)
    folder = example[1]
    cases = [json.loads(line) for line in (folder / "cases.from-traces.jsonl").read_text().splitlines()]
    by_question = {c["input"]["question"]: c for c in cases}
    assert set(by_question) == set(questions)
    for question, reply in answers.items():
        meta = by_question[question]["metadata"]
        assert meta["production_answer"] == reply["result"]["answer"]
        assert meta["recorded_retrieval"] == reply["evidence"]["retrieval"]
        assert meta["production_citations"] == reply["result"]["citations"]
    sampled = project.run("cases", "from-traces", "spans.jsonl", "-o", "five.jsonl", "--sample", "5", "--seed", "3",
                          "--where", "openinference.span.kind=RETRIEVER")
    assert sampled.code == 0, sampled
    assert len((folder / "five.jsonl").read_text().splitlines()) == 5
    # redacted attributes are gone before anything is read into a case
    hidden = project.run("cases", "from-traces", "spans.jsonl", "-o", "hidden.jsonl", "--redact", "output.value",
                         "--redact", "llm.output_messages.*", "--redact", "retrieval.documents.*.document.content")
    assert hidden.code == 0, hidden
    text = (folder / "hidden.jsonl").read_text()
    assert all(reply["result"]["answer"] not in text for reply in answers.values())
    assert all(json.loads(line)["metadata"]["production_answer"] is None for line in text.splitlines())
    # the staged replay of the recorded retrievals records exactly what production retrieved
    replayed = project.run("run", "--config", "oloproof.replay.yaml")
    assert replayed.code == 0, replayed
    for record in records(project, replayed).values():
        question = record["input"]["question"]
        assert record["artifacts"]["retrieval/v1"][-1]["candidates"] == answers[question]["evidence"]["retrieval"][
            "candidates"]
        assert record["output"]["answer"] == answers[question]["result"]["answer"]


LABELLED = """system:
  name: support-rag-replay
  version: tutorial
  rag:
    object: replay:ProductionReplay
cases: labelled.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
  - {type: hit_rate, k: 2}
"""


def labels_of(project: Project, run_id: str, config: str) -> list[str]:
    """The labels of a gold-context diagnosis and of a top-k 4 replay of run ``run_id``."""
    lines = []
    for extra in ((), ("--top-k", "4")):
        intervention = "top-k" if extra else "gold-context"
        result = project.run("diagnose", run_id, "--config", config, "--intervention", intervention,
                             "--criterion", "answer_correct", *extra)
        assert result.code == 0, result
        lines += [line for line in result.out.splitlines()
                  if line.startswith(("Recovered", "Confirmed", "RETRIEVAL_MISS", "CONTEXT_", "GENERATION_",
                                      "RANKED_OUT", "UNRESOLVED"))]
    return lines


def diagnosis_lines(project: Project, config: str) -> list[str]:
    """:func:`labels_of` a run of ``config``."""
    run = project.run("run", "--config", config)
    assert run.code in (0, 1, 3), run  # the staged example's policy blocks its gate
    return labels_of(project, next(word for word in run.out.split() if word.startswith("run_")), config)


@pytest.mark.slow  # two runs and four diagnoses
def test_a_replay_of_production_traces_is_diagnosed_as_the_staged_example(example, tmp_path):
    """The cases from-traces wrote, labelled as the tutorial's, replayed: the same diagnosis
    labels and the same top-k recoveries as examples/support_rag, the staged version."""
    _, folder = example
    produced = folder / "cases.from-traces.jsonl"
    if not produced.is_file():  # run alone (CI runs the slow tests apart): record the production traffic here
        _production_cases(example)
    labels = {json.loads(line)["input"]["question"]: json.loads(line)
              for line in (BLACKBOX / "cases.jsonl").read_text(encoding="utf-8").splitlines()}
    rows = []
    for line in produced.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        source = labels[case["input"]["question"]]
        rows.append({**case, "id": source["id"], "expected": source["expected"]})
    (folder / "labelled.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "oloproof.labelled.yaml").write_text(LABELLED, encoding="utf-8")
    staged = tmp_path / "support_rag"
    shutil.copytree(ROOT / "examples" / "support_rag", staged, ignore=shutil.ignore_patterns("__pycache__", ".oloproof"))
    replayed = diagnosis_lines(Project(folder), "oloproof.labelled.yaml")
    assert any(line.startswith("CONTEXT_ASSEMBLY_LOSS") for line in replayed)
    assert replayed == diagnosis_lines(Project(staged), "oloproof.yaml")

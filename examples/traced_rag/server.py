"""The tutorial application as a traced service: ``python server.py 8767``.

An aiohttp service instrumented with the OpenTelemetry SDK the way a team instruments its own:
a server span continues the caller's W3C ``traceparent``, a RETRIEVER span lists the documents
the search returned and an LLM span the messages the model was given, with OpenInference
attributes (``retrieval.documents.N.document.*``, ``llm.input_messages.N.message.*``,
``llm.token_count.*``). A ``BatchSpanProcessor`` exports them after the response, to
``OTEL_EXPORTER_OTLP_ENDPOINT`` (``http://127.0.0.1:4318`` by default) with the OTLP/HTTP
protobuf exporter, or, with ``OTEL_EXPORTER_OTLP_PROTOCOL=http/json``, as OTLP/JSON.

POST /answer with {"question": "..."}: the answer under ``result`` and, as blackbox_rag's
server.py does, the same evidence in the body (``evidence``), so a suite can read it either way.
It takes blackbox_rag's debugging override too: ``override.passages`` (the prompt's passages, no
search), ``override.top_k`` and the ``X-Word-Budget`` header; both suites declare them under
``interventions:``, so diagnose can re-execute cases through them, traced or not.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import urllib.request
from pathlib import Path

from aiohttp import web
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

try:
    import app
except ImportError:  # the application of the blackbox_rag example, beside this one
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "blackbox_rag"))
    import app

KIND = "openinference.span.kind"
PROPAGATOR = TraceContextTextMapPropagator()


class OTLPJsonExporter(SpanExporter):
    """OTLP/HTTP with the JSON encoding (the Python SDK's own exporter sends protobuf only):
    the SDK's protobuf request, written as OTLP/JSON (hex trace and span ids)."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint

    @staticmethod
    def document(spans) -> dict:
        """The SDK's own protobuf export request, as OTLP/JSON (hex ids)."""
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        data = MessageToDict(encode_spans(spans))
        for resource in data.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64decode(span[key]).hex()
        return data

    def export(self, spans) -> SpanExportResult:
        data = self.document(spans)
        request = urllib.request.Request(self.endpoint, data=json.dumps(data).encode("utf-8"), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class OTLPJsonFileExporter(OTLPJsonExporter):
    """Spans appended to a file as the collector's file exporter writes them: one OTLP/JSON
    export request a line (``OTEL_TRACES_FILE``), for ``oloproof cases from-traces``."""

    def export(self, spans) -> SpanExportResult:
        with open(self.endpoint, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(self.document(spans)) + "\n")
        return SpanExportResult.SUCCESS


def exporter_for(endpoint: str, protocol: str) -> SpanExporter:
    """The OTLP/HTTP exporter of ``protocol`` (``http/protobuf`` or ``http/json``) to ``endpoint``."""
    url = endpoint.rstrip("/") + "/v1/traces"
    if protocol == "http/json":
        return OTLPJsonExporter(url)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url)


def tracer_provider(exporter: SpanExporter, schedule_delay_millis: float = 200) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "support-rag"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=schedule_delay_millis))
    return provider


def answer(tracer, question: str, passages: list[dict] | None = None, top_k: int | None = None,
           word_budget: int | None = None) -> dict:
    """Search, fill the prompt, answer: each step in its span. The override as app.support_api's:
    ``passages`` fill the prompt as given, with no search; ``top_k`` and ``word_budget`` replace
    the application's for this request."""
    if passages is not None:
        sources, prompt_sources, skipped = [], app.given(passages), []
    else:
        with tracer.start_as_current_span("retrieve", attributes={KIND: "RETRIEVER", "input.value": question,
                                                                  "retrieval.depth": app.SEARCH_DEPTH}) as span:
            sources = app.search(question, app.SEARCH_DEPTH)
            for i, source in enumerate(sources):
                span.set_attributes({f"retrieval.documents.{i}.document.id": source["id"],
                                     f"retrieval.documents.{i}.document.score": source["score"],
                                     f"retrieval.documents.{i}.document.content": source["text"]})
        prompt_sources, skipped = app.assemble(sources, top_k, word_budget)
    with tracer.start_as_current_span("generate", attributes={KIND: "LLM", "llm.model_name": "extractive"}) as span:
        system = "Answer from these sources only:\n" + "\n".join(f"[{s['id']}] {s['text']}" for s in prompt_sources)
        if prompt_sources:
            text, cited = app.answer_from(question, prompt_sources[0]["text"]), [prompt_sources[0]["id"]]
        else:
            text, cited = "I could not find that in the knowledge base.", []
        prompt_tokens = len(system.split()) + len(question.split())
        span.set_attributes({"llm.input_messages.0.message.role": "system",
                             "llm.input_messages.0.message.content": system,
                             "llm.input_messages.1.message.role": "user",
                             "llm.input_messages.1.message.content": question,
                             "llm.output_messages.0.message.role": "assistant",
                             "llm.output_messages.0.message.content": text,
                             "llm.token_count.prompt": prompt_tokens,
                             "llm.token_count.completion": len(text.split()),
                             "llm.token_count.total": prompt_tokens + len(text.split())})
    return {"answer": text, "cited": cited, "sources": sources, "prompt_sources": prompt_sources, "skipped": skipped}


def evidence(question: str, response: dict, word_budget: int = app.PROMPT_WORD_BUDGET) -> dict:
    """What blackbox_rag's server.py returns in the body, for the same suite without traces."""
    return {
        "retrieval": {"query": question, "depth": app.SEARCH_DEPTH,
                      "candidates": [{"doc_id": s["id"], "score": s["score"], "text": s["text"]}
                                     for s in response["sources"]]},
        "context": {"items": [{"doc_id": i["id"], "position": i["rank"], "tokens": i["tokens"], "text": i["text"]}
                              for i in response["prompt_sources"]],
                    "dropped": [{"doc_id": i["id"], "position": i["rank"], "reason": i["why"]}
                                for i in response["skipped"]],
                    "token_budget": word_budget,
                    "source": "override" if not response["sources"] and response["prompt_sources"] else "retrieval"},
        "citations": {"ids": response["cited"]},
    }


def make_app(provider: TracerProvider) -> web.Application:
    tracer = provider.get_tracer("support-rag")

    async def handle(request: web.Request) -> web.Response:
        try:
            body = await request.json()
            question = str(body["question"])
            passages, top_k, word_budget = app.override_of(body, request.headers.get("X-Word-Budget"))
        except (ValueError, KeyError, TypeError, AttributeError):
            return web.json_response({"error": 'send {"question": "..."}'}, status=400)
        parent = PROPAGATOR.extract(request.headers)  # the caller's traceparent, when it sends one
        with tracer.start_as_current_span("POST /answer", context=parent, kind=SpanKind.SERVER,
                                          attributes={KIND: "CHAIN", "input.value": question}) as span:
            response = answer(tracer, question, passages, top_k, word_budget)
            span.set_attributes({"output.value": response["answer"], "output.citations": response["cited"]})
        return web.json_response({"result": {"answer": response["answer"], "citations": response["cited"]},
                                  "evidence": evidence(question, response, word_budget)})

    web_app = web.Application()
    web_app.router.add_post("/answer", handle)
    return web_app


def provider_from_environment() -> TracerProvider:
    """The standard variables: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (``http://127.0.0.1:4318``),
    ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf`` or ``http/json``),
    ``OTEL_BSP_SCHEDULE_DELAY`` (200 ms here), ``OTEL_TRACES_EXPORTER=none`` (no export) and
    ``OTEL_TRACES_FILE`` (OTLP/JSON lines appended to that file instead)."""
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp") == "none":
        return TracerProvider(resource=Resource.create({"service.name": "support-rag"}))
    if os.environ.get("OTEL_TRACES_FILE"):  # production's spans kept in a file, for `cases from-traces`
        return tracer_provider(OTLPJsonFileExporter(os.environ["OTEL_TRACES_FILE"]))
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    return tracer_provider(exporter_for(endpoint, protocol), float(os.environ.get("OTEL_BSP_SCHEDULE_DELAY", 200)))


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8767
    provider = provider_from_environment()
    print(f"serving on http://127.0.0.1:{port}/answer", flush=True)
    try:
        web.run_app(make_app(provider), host="127.0.0.1", port=port, print=None, access_log=None)
    finally:
        provider.shutdown()

"""The ``otlp`` trace receiver: the spans a traced system exports during a run become its cases'
artifacts (docs/traces.md).

``traces: otlp`` starts an OTLP/HTTP receiver on 127.0.0.1 (a free port, or ``port:``) before the
system is built, exports its address as ``OTEL_EXPORTER_OTLP_ENDPOINT``, and wraps the system:
every case (and trial) gets a fresh trace id, sent as a W3C ``traceparent`` (the ``http`` system
puts it on its request; a callable system runs inside it when ``opentelemetry-api`` is
installed), and the spans that arrive on ``/v1/traces`` (protobuf or JSON) with that trace id are
filed under the case. After the system answers, the case waits up to ``grace`` seconds for the
span whose parent is the Oloproof span (the service's entry span, which its batch exporter sends
after its children); other cases go on meanwhile. The span mappings then record artifacts from
the spans. A case whose spans never came is ``unrecorded`` with ``no_trace_spans``; spans of
trace ids the run did not make are ignored and counted.

The server (server.py) runs on a thread of its own from the start; once an opaque asynchronous
system (``http``: a service in another process) runs, new connections are served on the run's
event loop instead, where the cases wait for their spans.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from attrs import frozen

from oloproof import ConfigError, hookimpl

PATH = "/v1/traces"
WAITING = 2048  # cases of an asynchronous system that may wait for their spans at once
WAITING_THREADS = 32  # and of a synchronous one (a thread each)


@frozen(kw_only=True)
class Options:
    port: int = 0  # 0: a free port of 127.0.0.1; a fixed one lets a service started beforehand export here
    grace: float = 5.0  # seconds a case waits for its spans after the system answered
    max_request_bytes: int = 64_000_000


def check(options: Options) -> None:
    if not 0 <= options.port <= 65535:
        raise ConfigError(f"port must be between 0 and 65535, got {options.port}", fix="write port: 4318, or leave it out")
    if options.grace < 0:
        raise ConfigError(f"grace must be at least 0 seconds, got {options.grace}", fix="write grace: 5")


# -- decoding: the official protobuf classes, for both encodings ---------------------------------


PLAIN = frozenset({"string_value", "int_value", "double_value", "bool_value"})


def value_of(any_value: Any) -> Any:
    """An OTLP AnyValue as a plain value (arrays as lists, key-value lists as dicts)."""
    which = any_value.WhichOneof("value")
    if which is None:
        return None
    value = getattr(any_value, which)
    if which in PLAIN:
        return value
    if which == "array_value":
        return [value_of(v) for v in value.values]
    if which == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.values}
    if which == "bytes_value":
        return base64.b64encode(value).decode("ascii")
    return value


def attributes_of(pairs: Any) -> dict:
    attributes = {}
    for kv in pairs:
        value = kv.value
        text = value.string_value  # most values are text: one read ("" when the value is not text)
        if text:
            attributes[kv.key] = text
            continue
        which = value.WhichOneof("value")
        attributes[kv.key] = getattr(value, which) if which in PLAIN else value_of(value)
    return attributes


KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def raw_spans(request: Any) -> Any:
    """The protobuf spans of an ``ExportTraceServiceRequest``, in order."""
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            yield from scope_spans.spans


def span_of(span: Any) -> dict:
    """A protobuf span as the plain dict span mappings read."""
    return {"trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
            "parent_span_id": span.parent_span_id.hex() or None, "name": span.name,
            "kind": KINDS.get(span.kind, str(span.kind)),
            "start_ns": span.start_time_unix_nano, "end_ns": span.end_time_unix_nano,
            "attributes": attributes_of(span.attributes),
            "events": [{"name": e.name, "time_ns": e.time_unix_nano, "attributes": attributes_of(e.attributes)}
                       for e in span.events]}


def spans_of(request: Any) -> list[dict]:
    """The spans of an ``ExportTraceServiceRequest`` as the plain dicts span mappings read."""
    return [span_of(span) for span in raw_spans(request)]


IDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids_to_base64(node: Any) -> None:
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping expects base64."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in IDS and isinstance(value, str):
                node[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
            else:
                _hex_ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)


def decode(body: bytes, json_encoded: bool) -> Any:
    """An ``ExportTraceServiceRequest`` from an OTLP/HTTP body (protobuf, or OTLP/JSON)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    if json_encoded:
        from google.protobuf import json_format

        data = json.loads(body)
        _hex_ids_to_base64(data)
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    else:
        request.ParseFromString(body)
    return request


def read_file_spans(text: str) -> list[dict]:
    """The spans of an OTLP/JSON file, as the collector's file exporter writes it (one
    ``ExportTraceServiceRequest`` a line) or as one JSON document."""
    spans = []
    stripped = text.strip()
    documents = [stripped] if stripped.startswith("{") and "\n{" not in stripped else stripped.splitlines()
    for line in documents:
        if line.strip():
            spans.extend(spans_of(decode(line.encode("utf-8"), True)))
    return spans


# -- waiting for a case's spans ------------------------------------------------------------------


class Pending:
    """One case's trace: its ids, the spans filed so far, and how its waiter is woken."""

    __slots__ = ("trace_id", "span_id", "spans", "complete", "event", "waiter")

    def __init__(self) -> None:
        ids = os.urandom(24).hex()
        self.trace_id, self.span_id = ids[:32], ids[32:]
        self.spans: list = []  # the protobuf spans filed so far (read into dicts by finish)
        self.complete = False
        self.event: threading.Event | None = None
        self.waiter: tuple | None = None  # (event loop, future) of an asynchronous case

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-01"


def wake(woken: list[Pending]) -> None:
    """Wake the cases of ``woken``: a synchronous one's event set, and on each event loop that
    has asynchronous ones waiting, one callback that resolves them all."""
    loops: dict[Any, list] = {}
    for pending in woken:
        if pending.event is not None:
            pending.event.set()
        if pending.waiter is not None:
            loop, future = pending.waiter
            loops.setdefault(loop, []).append(future)
    if not loops:
        return
    import asyncio

    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # the receiver's thread has a loop too; another thread none
        running = None
    for loop, futures in loops.items():
        if loop is running:  # filed on the loop where the cases wait
            _resolve(futures)
            continue
        try:
            loop.call_soon_threadsafe(_resolve, futures)
        except RuntimeError:  # that loop has closed: nobody waits there any more
            pass


def _resolve(futures: Sequence, start: int = 0) -> None:
    """Wake one waiting case a turn of the event loop, from ``futures[start]`` on: between two,
    the loop reads its sockets, so the calls in flight are answered while an export's cases
    finish (woken sixteen a turn, the calls waited and a traced run was measurably slower)."""
    if start < len(futures):
        future = futures[start]
        if not future.done():
            future.set_result(None)
        if start + 1 < len(futures):
            future.get_loop().call_soon(_resolve, futures, start + 1)


class Receiver:
    """The OTLP/HTTP server (server.py) and the spans it files by trace id."""

    def __init__(self, options: Options, mappings: Any):
        check(options)
        self.options = options
        self.mappings = dict(mappings)  # name -> span mapping
        self.produces = frozenset(kind for m in self.mappings.values() for kind in getattr(m, "produces", ()))
        self.lock = threading.Lock()
        self.pending: dict[str, Pending] = {}
        self.finished: set[str] = set()
        self.figures = {"spans": 0, "ignored": 0, "late": 0, "cases": 0, "no_spans": 0, "requests": 0}
        self.server: Any = None
        self.port = 0
        self._start()
        self.endpoint = f"http://127.0.0.1:{self.port}{PATH}"
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{self.port}"

    # the server (server.py): a thread running its own event loop, then (serve_here) the run's
    # loop too; a request is decoded and its spans filed where it is served, and the cases whose
    # spans came are woken on their own loop.

    def _start(self) -> None:
        from oloproof_otlp.server import Server, listening

        try:
            sock = listening(self.options.port)
        except OSError as exc:
            raise ConfigError(f"the OTLP receiver cannot listen on 127.0.0.1:{self.options.port}: {exc}",
                              fix="free the port, or leave port: out for a free one") from None
        self.port = sock.getsockname()[1]
        self.server = Server(sock, self.handle, self.options.max_request_bytes)
        self.thread = self.server.thread

    def handle(self, path: str, headers: dict, body: bytes) -> tuple[int, bytes, str]:
        if path.split("?")[0] != PATH:
            return 404, f"not found: send spans to {PATH}".encode(), "text/plain"
        return self.receive(body, headers.get("content-type", ""), headers.get("content-encoding", ""))

    def receive(self, body: bytes, content_type: str, content_encoding: str) -> tuple[int, bytes, str]:
        """One export request: (status, body, content type) of the answer."""
        if content_encoding.lower() == "gzip":
            import gzip

            try:
                body = gzip.decompress(body)
            except (OSError, EOFError) as exc:
                return 400, f"cannot decompress the OTLP request: {type(exc).__name__}".encode(), "text/plain"
        json_encoded = content_type.split(";")[0].strip().lower() == "application/json"
        try:
            request = decode(body, json_encoded)
        except Exception as exc:  # noqa: BLE001 - a malformed export is the exporter's 400, not the run's end
            return 400, f"cannot decode the OTLP request: {type(exc).__name__}".encode(), "text/plain"
        self.file(request)
        if json_encoded:
            return 200, b"{}", "application/json"
        # an empty ExportTraceServiceResponse: no field set serialises to no bytes
        return 200, b"", "application/x-protobuf"

    def file(self, request: Any) -> None:
        """File each span of an export request under its case; count those of no case of this
        run (read no further than their trace id)."""
        woken = []
        with self.lock:
            self.figures["requests"] += 1
            for span in raw_spans(request):
                trace_id = span.trace_id.hex()
                pending = self.pending.get(trace_id)
                if pending is None:
                    self.figures["late" if trace_id in self.finished else "ignored"] += 1
                    continue
                pending.spans.append(span)  # read into a dict by the case (finish), not here
                self.figures["spans"] += 1
                if span.parent_span_id.hex() == pending.span_id and not pending.complete:
                    pending.complete = True
                    woken.append(pending)
        wake(woken)

    def close(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.close()

    async def aclose(self) -> None:
        """:meth:`close` on the event loop the server moved to (an asynchronous system's)."""
        await self.server.aclose()

    # the cases

    def open(self) -> Pending:
        pending = Pending()
        with self.lock:
            self.pending[pending.trace_id] = pending
        return pending

    def wait(self, pending: Pending) -> None:
        with self.lock:
            if pending.complete:
                return
            pending.event = threading.Event()
        pending.event.wait(self.options.grace)

    async def await_spans(self, pending: Pending) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self.lock:
            if pending.complete:
                return
            pending.waiter = (loop, future)
        timer = loop.call_at(loop.time() + self.options.grace, _resolve, (future,))  # the grace period's end
        try:
            await future
        finally:
            timer.cancel()

    def forget(self, pending: Pending) -> list[dict]:
        """The case's spans as the span mappings read them; it waits for no more."""
        return [span_of(span) for span in self.drop(pending)]

    def drop(self, pending: Pending) -> list:
        """Stop filing spans under the case (later ones count as late); its spans as filed."""
        with self.lock:
            self.pending.pop(pending.trace_id, None)
            self.finished.add(pending.trace_id)
            return list(pending.spans)

    def finish(self, pending: Pending, recorder: Any) -> None:
        """Record what the mappings make of the case's spans, or why there is nothing."""
        spans = self.forget(pending)
        if not spans:
            with self.lock:
                self.figures["no_spans"] += 1
            recorder.unrecorded = "no_trace_spans"
            return
        with self.lock:
            self.figures["cases"] += 1
        spans.sort(key=lambda s: (s["start_ns"], s["end_ns"]))
        found = False
        for name, mapping in self.mappings.items():
            for kind, value in mapping.map(spans):
                recorder.record(kind, value, source=f"span mapping {name}")
                found = True
        if not found:
            seen = sorted({s["name"] for s in spans})
            shown = ", ".join(seen[:8]) + (f" and {len(seen) - 8} more" if len(seen) > 8 else "")
            recorder.unrecorded = (f"no_mapped_spans: {', '.join(self.mappings)} found nothing in "
                                   f"{len(spans)} spans ({shown})")

    def describe(self) -> dict:
        with self.lock:
            return {"receiver": "otlp", "endpoint": self.endpoint, "grace": self.options.grace,
                    "mappings": list(self.mappings), **self.figures}

    def wrap(self, system: Any) -> Any:
        return (AsyncTraced if hasattr(system, "aexecute") else Traced)(system, self)


def otel_context(traceparent: str) -> Any:
    """The OpenTelemetry context of ``traceparent`` attached (a token to detach), or None when
    ``opentelemetry-api`` is not installed: a callable system's spans then join the case's trace."""
    try:
        from opentelemetry import context
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return None
    return context.attach(TraceContextTextMapPropagator().extract({"traceparent": traceparent}))


class Traced:
    """The suite's system with a trace per case; everything else is the system's own."""

    def __init__(self, system: Any, receiver: Receiver):
        self.inner, self.receiver = system, receiver
        self.name, self.version = system.name, system.version
        self.identity = {**system.identity, "traces": {"receiver": "otlp", "mappings": list(receiver.mappings)}}
        self.records = frozenset(system.records) | receiver.produces
        self.opaque = getattr(system, "opaque", False)
        self.concurrency = getattr(system, "concurrency", None)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def trace_figures(self) -> dict:
        return self.receiver.describe()

    calls: Any = None

    def spread(self, concurrency: int) -> int:
        """Threads waiting for their spans hold no call slot: ``concurrency`` calls at once, and
        up to ``WAITING_THREADS`` more cases waiting."""
        self.calls = threading.BoundedSemaphore(concurrency)
        return concurrency + WAITING_THREADS

    def execute(self, case: Any, recorder: Any) -> Any:
        pending = self.receiver.open()
        recorder.traceparent = pending.traceparent
        token = otel_context(pending.traceparent)
        try:
            if self.calls is None:
                output = self.inner.execute(case, recorder)
            else:
                with self.calls:
                    output = self.inner.execute(case, recorder)
        except BaseException:
            self.receiver.drop(pending)  # the system failed: nothing to read
            raise
        finally:
            if token is not None:
                from opentelemetry import context

                context.detach(token)
        self.receiver.wait(pending)
        self.receiver.finish(pending, recorder)
        return output


class AsyncTraced(Traced):
    """A traced asynchronous system (``http``): many cases wait for their spans at once, while
    at most the suite's concurrency of them call the system."""

    def __init__(self, system: Any, receiver: Receiver):
        super().__init__(system, receiver)
        self.slots: Any = None
        self.limit = 0

    def spread(self, concurrency: int) -> int:
        """The work's concurrency ``concurrency`` caps the calls; this many cases may be in flight."""
        self.limit = concurrency
        # a waiting case costs a future: enough of them that the grace period never paces the run
        return concurrency + WAITING

    async def aexecute(self, case: Any, recorder: Any) -> Any:
        import asyncio

        if self.slots is None:  # made on the run's event loop
            self.slots = asyncio.Semaphore(self.limit or 8)
            if self.opaque:  # a service in another process exports to it: received where the cases wait
                await self.receiver.server.serve_here()
        pending = self.receiver.open()
        recorder.traceparent = pending.traceparent
        try:
            async with self.slots:
                output = await self.inner.aexecute(case, recorder)
        except BaseException:
            self.receiver.drop(pending)  # the system failed: nothing to read
            raise
        await self.receiver.await_spans(pending)
        self.receiver.finish(pending, recorder)
        return output

    async def aclose(self) -> None:
        try:
            closer = getattr(self.inner, "aclose", None)
            if closer is not None:
                await closer()
        finally:
            await self.receiver.aclose()


@hookimpl
def oloproof_register_trace_receivers(registry):
    registry.add("otlp", Receiver, options=Options, read_file=read_file_spans)

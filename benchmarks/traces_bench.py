"""A traced run against an untraced one: the overhead of ``traces: otlp`` as a ratio in one run.

Informative only, like the other benchmarks: the figures are printed beside the target and the
script exits 0 whatever they are.

    python benchmarks/traces_bench.py                  # 1,000 cases, each run seven times
    python benchmarks/traces_bench.py --cases 300 --repeat 1 --json traces.json

Three services of examples/traced_rag/server.py run in their own processes, each instrumented
with the OpenTelemetry SDK (OTLP/HTTP protobuf, a BatchSpanProcessor whose schedule delay is
``--schedule-delay``, 20 ms by default: the last cases of a traced run wait that long for their
spans, so an evaluation run sets it low) and each returning its evidence in the body too:

- ``traced``: exports its spans to the traced run's receiver on a fixed port;
- ``sink``: exports its spans to a sink that reads and drops them (the collector a traced service
  already exports to in production): the same service, doing the same work, but Oloproof does
  not receive its spans;
- ``uninstrumented``: exports nothing (``OTEL_TRACES_EXPORTER=none``).

Each ``oloproof run`` is a subprocess timed from start to exit; the suites have the same cases,
evaluators and concurrency, and the runs alternate, one of each a round. The traced suite reads
its artifacts from the spans, the others the same evidence from the body (retrieval, context,
citations; the spans add a ``usage/v1``). Oloproof's overhead is the median over the rounds of
the traced run's time over the time of the run against the sink made right after it (target:
within 1.2×): a pair made seconds apart shares the machine's load, which on a shared machine
moves the runs of one invocation by more than the overhead itself. The fastest traced run over
the fastest run against the sink is printed beside it, and the fastest traced run over the
fastest uninstrumented one: that ratio adds what exporting costs the service itself (on a small
machine, the service and Oloproof share its cores). The difference of the least Oloproof CPU
time of the traced and the sink runs, per case, is printed too.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Child, child_env, fmt, load_average, log, oloproof_command, save_json, table, workdir

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "traced_rag"
TARGET = 1.2

SUITE = """system:
  name: bench-traces
  version: "1"
  http:
    url: {url}
    output_path: result
{artifacts}cases: cases.jsonl
evaluators:
  - {{type: contains, criterion: answer_correct, field: answer, expected_field: answer}}
  - {{type: hit_rate, k: 2}}
  - {{type: recall, k: 2}}
concurrency: {concurrency}
{traces}"""
BODY = """    artifacts:
      retrieval/v1: evidence.retrieval
      context/v1: evidence.context
      citations/v1: evidence.citations
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_service(port: int, env: dict) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(EXAMPLE / "server.py"), str(port)], cwd=EXAMPLE,
                            env={**child_env(), **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/answer", data=b'{"question": "refunds"}',
                                             headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=2).read()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the example service did not start on port {port}")


SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
"""


def start_sink(port: int) -> subprocess.Popen:
    """A receiver that reads every export request and drops it (an OTLP/HTTP 200, empty body)."""
    proc = subprocess.Popen([sys.executable, "-c", SINK, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the sink did not start on port {port}")


def project(folder: Path, name: str, cases: int, suite: str) -> Path:
    path = folder / name
    path.mkdir()
    rows = [json.loads(line) for line in (ROOT / "examples" / "blackbox_rag" / "cases.jsonl").read_text().splitlines()]
    with (path / "cases.jsonl").open("w", encoding="utf-8") as handle:
        for i in range(cases):
            row = dict(rows[i % len(rows)])
            row["id"] = f"{row['id']}-{i:05d}"
            handle.write(json.dumps(row) + "\n")
    (path / "oloproof.yaml").write_text(suite, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7, help="rounds: each suite runs once a round")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--schedule-delay", type=int, default=20,
                        help="the services' OTEL_BSP_SCHEDULE_DELAY in ms: how long a span may wait to be exported")
    parser.add_argument("--json", help="write the figures to this file too")
    parser.add_argument("--keep", help="keep the projects in this folder")
    args = parser.parse_args(argv)
    receiver, sink_port = free_port(), free_port()
    ports = {"traced": free_port(), "sink": free_port(), "uninstrumented": free_port()}
    services = [start_sink(sink_port)]
    times: dict[str, list[float]] = {name: [] for name in ports}
    cpu: dict[str, list[float]] = {name: [] for name in ports}
    missing = {}
    try:
        services += [
            start_service(ports["traced"], {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver}",
                                            "OTEL_BSP_SCHEDULE_DELAY": str(args.schedule_delay)}),
            start_service(ports["sink"], {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}",
                                          "OTEL_BSP_SCHEDULE_DELAY": str(args.schedule_delay)}),
            start_service(ports["uninstrumented"], {"OTEL_TRACES_EXPORTER": "none"}),
        ]
        with workdir(args.keep, "oloproof-traces-bench-") as folder:
            projects = {
                name: project(folder, name, args.cases, SUITE.format(
                    url=f"http://127.0.0.1:{port}/answer", concurrency=args.concurrency,
                    artifacts="" if name == "traced" else BODY,
                    traces=(f"traces:\n  otlp: {{port: {receiver}, grace: 5}}\n  mappings: [openinference]\n"
                            if name == "traced" else "")))
                for name, port in ports.items()
            }
            for path in projects.values():  # warm-up: bytecode, the services' first requests
                Child([*oloproof_command(), "run", "--limit", "20"], cwd=path, env=child_env()).check((0, 1))
            for _ in range(args.repeat):
                for name, path in projects.items():
                    child = Child([*oloproof_command(), "run"], cwd=path, env=child_env()).check((0, 1))
                    times[name].append(child.seconds)
                    cpu[name].append(child.cpu)
                    missing[name] = child.stdout.count("no_trace_spans")
                    log(f"{name}: {child.seconds:.2f} s, cpu {child.cpu:.2f} s")
    finally:
        for service in services:
            service.terminate()
            service.wait(10)
    best = {name: min(values) for name, values in times.items()}
    ratio = statistics.median(t / s for t, s in zip(times["traced"], times["sink"]))
    # less sensitive to the machine's load than the wall times: the least CPU of each, per case
    cpu_per_case = (min(cpu["traced"]) - min(cpu["sink"])) / args.cases * 1000
    print(f"load average: {load_average()}")
    print(table(["figure", "value", "target"], [
        ["run, service exporting to a sink (s)", fmt(best["sink"], "s"), ""],
        ["run, service exporting nothing (s)", fmt(best["uninstrumented"], "s"), ""],
        ["traced run (s)", fmt(best["traced"], "s"), ""],
        ["Oloproof CPU: traced, sink (s)", f"{min(cpu['traced']):.2f}, {min(cpu['sink']):.2f}", ""],
        ["Oloproof CPU a case, traced − sink (ms)", f"{cpu_per_case:.2f}", ""],
        [f"traced ÷ sink at {args.cases} cases, median of {args.repeat} rounds (Oloproof's overhead)", fmt(ratio, "×"),
         f"≤ {TARGET}× {'PASS' if ratio <= TARGET else 'MISS'}"],
        ["fastest traced ÷ fastest sink", fmt(best["traced"] / best["sink"], "×"), ""],
        ["traced ÷ exporting nothing (adds the service's export)", fmt(best["traced"] / best["uninstrumented"], "×"), ""],
    ]))
    if missing.get("traced"):
        print(f"note: the traced run's report mentions no_trace_spans {missing['traced']} times")
    save_json(args.json, {"cases": args.cases, "times": times, "cpu": cpu, "ratio": ratio,
                          "cpu_ms_per_case": cpu_per_case, "target": TARGET, "load_average": load_average()})
    return 0


if __name__ == "__main__":
    sys.exit(main())

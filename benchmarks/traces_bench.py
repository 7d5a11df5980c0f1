"""A traced run against an untraced one: the overhead of ``traces: otlp`` as a ratio in one run.

Informative only, like the other benchmarks: the figures are printed beside the target and the
script exits 0 whatever they are.

    python benchmarks/traces_bench.py                  # 1,000 cases, each run twice
    python benchmarks/traces_bench.py --cases 300 --repeat 1 --json traces.json

Two services of examples/traced_rag/server.py run in their own processes: one exports its spans
(OTLP/HTTP protobuf, a BatchSpanProcessor with a 200 ms schedule) to the traced run's receiver on a
fixed port, the other exports nothing (``OTEL_TRACES_EXPORTER=none``) and returns its evidence in
the body. Each ``oloproof run`` is a subprocess timed from start to exit; the two suites have the
same cases, evaluators and concurrency, and the runs alternate. The figure is the fastest traced run
over the fastest untraced one (target: within 1.2×).
"""

from __future__ import annotations

import argparse
import json
import socket
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
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", help="write the figures to this file too")
    parser.add_argument("--keep", help="keep the projects in this folder")
    args = parser.parse_args(argv)
    receiver, traced_port, plain_port = free_port(), free_port(), free_port()
    traced_service = start_service(traced_port, {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver}",
                                                 "OTEL_BSP_SCHEDULE_DELAY": "200"})
    plain_service = start_service(plain_port, {"OTEL_TRACES_EXPORTER": "none"})
    times: dict[str, list[float]] = {"untraced": [], "traced": []}
    missing = {}
    try:
        with workdir(args.keep, "oloproof-traces-bench-") as folder:
            projects = {
                "untraced": project(folder, "untraced", args.cases, SUITE.format(
                    url=f"http://127.0.0.1:{plain_port}/answer", artifacts=BODY, concurrency=args.concurrency,
                    traces="")),
                "traced": project(folder, "traced", args.cases, SUITE.format(
                    url=f"http://127.0.0.1:{traced_port}/answer", artifacts="", concurrency=args.concurrency,
                    traces=f"traces:\n  otlp: {{port: {receiver}, grace: 5}}\n  mappings: [openinference]\n")),
            }
            for path in projects.values():  # warm-up: bytecode, the services' first requests
                Child([*oloproof_command(), "run", "--limit", "20"], cwd=path, env=child_env()).check((0, 1))
            for _ in range(args.repeat):
                for name, path in projects.items():
                    child = Child([*oloproof_command(), "run"], cwd=path, env=child_env()).check((0, 1))
                    times[name].append(child.seconds)
                    missing[name] = child.stdout.count("no_trace_spans")
                    log(f"{name}: {child.seconds:.2f} s, cpu {child.cpu:.2f} s")
    finally:
        for service in (traced_service, plain_service):
            service.terminate()
            service.wait(10)
    ratio = min(times["traced"]) / min(times["untraced"])
    print(table(["figure", "value", "target"], [
        ["untraced run (s)", fmt(min(times["untraced"]), "s"), ""],
        ["traced run (s)", fmt(min(times["traced"]), "s"), ""],
        [f"traced ÷ untraced at {args.cases} cases", fmt(ratio, "×"),
         f"≤ {TARGET}× {'PASS' if ratio <= TARGET else 'MISS'}"],
    ]))
    if missing.get("traced"):
        print(f"note: the traced run's report mentions no_trace_spans {missing['traced']} times")
    save_json(args.json, {"cases": args.cases, "times": times, "ratio": ratio, "target": TARGET,
                          "load_average": load_average()})
    return 0


if __name__ == "__main__":
    sys.exit(main())

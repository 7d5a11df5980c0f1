"""The same suite through the local and the ray executors: wall time, cases/s and the ratio.

    python benchmarks/scale_bench.py                 # 10,000 no-op cases and 2,000 CPU-bound ones
    python benchmarks/scale_bench.py --cases 2000 --cpu-cases 400

Two systems: a no-op callable (what each executor costs per case) and a CPU-bound one (a pure-Python
loop of about 5 ms per case, the kind of retriever that holds the GIL: local threads share one core,
ray replicas get one each). A Ray head is started for the benchmark (``ray start --head`` with
``--num-cpus`` set to this machine's cores) and stopped at the end; each figure is the median of
``--repeat`` cold runs (``--no-cache``), every ``oloproof run`` a subprocess. Informative only: the
script exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from ray_head import RayHead  # the tests' own head, so both start Ray the same way

SYSTEMS = {
    "no-op": 'from oloproof import system\n\n\n@system(name="noop", version="1")\ndef run(input):\n'
             '    return {"answer": "ok"}\n',
    "cpu 5 ms": 'from oloproof import system\n\n\n@system(name="cpu", version="1")\ndef run(input):\n'
                '    total = 0\n    for i in range(60_000):\n        total += i * i % 7\n'
                '    return {"answer": "ok", "total": total}\n',
}


def project(root: Path, app: str, n: int, executor: str) -> Path:
    root.mkdir(parents=True)
    (root / "app.py").write_text(app)
    (root / "oloproof.yaml").write_text(
        f'system: {{name: bench, version: "1", callable: app:run}}\ncases: cases.jsonl\nconcurrency: 1\n'
        f"executor: {executor}\n"
        "evaluators:\n  - {type: contains, criterion: ok, field: answer, expected_field: answer}\n")
    with (root / "cases.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"c{i:07d}", "input": {"q": i}, "expected": {"answer": "ok"}}) + "\n")
    return root


def timed(root: Path, env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).with_name("oloproof")), "run", "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"oloproof run failed in {root}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000, help="no-op cases")
    parser.add_argument("--cpu-cases", type=int, default=2_000, help="CPU-bound cases")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    head = RayHead(num_cpus=cores).start()
    env = {**head.env(), "NO_COLOR": "1"}
    ray_executor = f"{{type: ray, replicas: {cores}, num_cpus: 1, batch_size: 256}}"
    print(f"# scale_bench: {cores} cores, load average at start {os.getloadavg()[0]:.2f}, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"{'system':<10} {'cases':>7} {'local s':>9} {'ray s':>9} {'local c/s':>10} {'ray c/s':>9} {'ray/local':>10}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, n in (("no-op", args.cases), ("cpu 5 ms", args.cpu_cases)):
                local = project(Path(tmp) / f"{name}-local".replace(" ", "_"), SYSTEMS[name], n, "local")
                remote = project(Path(tmp) / f"{name}-ray".replace(" ", "_"), SYSTEMS[name], n, ray_executor)
                walls: dict[str, list[float]] = {"local": [], "ray": []}
                for _ in range(args.repeat):  # interleaved, so a change in the machine's load hits both
                    walls["local"].append(timed(local, env))
                    walls["ray"].append(timed(remote, env))
                lw, rw = statistics.median(walls["local"]), statistics.median(walls["ray"])
                print(f"{name:<10} {n:>7} {lw:>9.2f} {rw:>9.2f} {n / lw:>10.0f} {n / rw:>9.0f} {rw / lw:>10.2f}")
    finally:
        head.stop()
    print(f"# load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

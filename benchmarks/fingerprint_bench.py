"""What the code fingerprints cost: a 50-module project, cold, beside a whole 1-case run.

    python benchmarks/fingerprint_bench.py                 # 50 modules, 7 cold measurements
    python benchmarks/fingerprint_bench.py --modules 200 --runs 5

The generated project is a staged system whose retriever and generator each import a chain of
modules (every module holds functions, a class and a data constant, and imports the next one).
Each measurement is a fresh interpreter that imports the project and then times what a system
plugin computes when a suite loads: ``project_fingerprint`` (the execution identity) and one
``reach_fingerprint`` per stage (the stage keys). The reference, measured in the same run, is
the wall time of ``oloproof run`` of the same project with one case. Informative only: the script
exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 50.0

MODULE = '''
"""Module {i} of the benchmark project."""

import re

{imports}

TABLE_{i} = {{"k{i}_" + str(n): n * {i} for n in range(40)}}


def helper_{i}(text):
    return [w for w in re.findall(r"[a-z]+", text) if len(w) > {i} % 5]


def score_{i}(text):
    return sum(len(w) for w in helper_{i}(text)) + len(TABLE_{i}){call}


class Worker{i}:
    def __init__(self):
        self.scale = {i}

    def run(self, text):
        return score_{i}(text) * self.scale
'''

APP = '''
from oloproof import Passage, Retrieval, rag_system

import gen_0
import ret_0


@rag_system(name="bench", version="1", depth=2, index_version="v1")
class Bench:
    def retrieve(self, input, depth):
        score = ret_0.score_0(input["q"])
        return Retrieval(query=input["q"], depth=depth,
                         candidates=tuple(Passage(doc_id=f"d{{n}}", text=str(score)) for n in range(depth)))

    def generate(self, input, context):
        return {{"answer": str(gen_0.score_0(input["q"]))}}
'''

MEASURE = '''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import app
import importlib_metadata  # loaded by the plugin manager before any system is, in every run
from oloproof import project_fingerprint, reach_fingerprint
cls = app.Bench
start = time.perf_counter()
project = project_fingerprint([sys.argv[1]])
middle = time.perf_counter()
stages = [reach_fingerprint([getattr(cls, s), cls.__init__], [sys.argv[1]], cls=cls) for s in ("retrieve", "generate")]
end = time.perf_counter()
print(json.dumps({"project_ms": (middle - start) * 1000, "stages_ms": (end - middle) * 1000,
                  "modules": len(project["modules"]), "reached": [sum(k.startswith("module:") for k in r) for r in stages]}))
'''


def make_project(root: Path, modules: int) -> None:
    half = modules // 2
    for prefix, count in (("ret", half), ("gen", modules - half)):
        for i in range(count):
            last = i == count - 1
            (root / f"{prefix}_{i}.py").write_text(MODULE.format(
                i=i, imports="" if last else f"import {prefix}_{i + 1}",
                call="" if last else f" + {prefix}_{i + 1}.score_{i + 1}(text)"), encoding="utf-8")
    (root / "app.py").write_text(APP.format(), encoding="utf-8")
    (root / "oloproof.yaml").write_text("system:\n  rag: app:Bench\ncases: cases.jsonl\nevaluators:\n"
                                        "  - {type: contains, criterion: ok, field: answer, expected_field: answer}\n",
                                        encoding="utf-8")
    (root / "cases.jsonl").write_text(json.dumps({"id": "c1", "input": {"q": "some words here"},
                                                  "expected": {"answer": "1"}}) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=50, help="modules in the project (50)")
    parser.add_argument("--runs", type=int, default=7, help="cold measurements, each a fresh interpreter (7)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oloproof-fingerprint-") as folder:
        root = Path(folder)
        make_project(root, args.modules)
        figures = [json.loads(subprocess.run([sys.executable, "-c", MEASURE, str(root)], check=True,
                                             capture_output=True, text=True).stdout) for _ in range(args.runs)]
        runs = []
        for _ in range(max(3, args.runs // 2)):
            for path in (root / ".oloproof").glob("*"):
                path.unlink()
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "oloproof", "run"], cwd=root, capture_output=True, check=False)
            runs.append((time.perf_counter() - start) * 1000)
    total = statistics.median(f["project_ms"] + f["stages_ms"] for f in figures)
    run_ms = statistics.median(runs)
    print(f"Code fingerprints of a {args.modules}-module project ({figures[0]['modules']} project modules loaded, "
          f"stages reach {figures[0]['reached']} modules), median of {args.runs} cold interpreters:")
    print(f"  execution identity (project_fingerprint): {statistics.median(f['project_ms'] for f in figures):.1f} ms")
    print(f"  stage identities (2 x reach_fingerprint):  {statistics.median(f['stages_ms'] for f in figures):.1f} ms")
    print(f"  together: {total:.1f} ms; target {TARGET_MS:.0f} ms: measured/target {total / TARGET_MS:.2f}")
    print(f"  reference, the same run: `oloproof run` of this project with 1 case, {run_ms:.0f} ms wall; "
          f"fingerprints/run {total / run_ms:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

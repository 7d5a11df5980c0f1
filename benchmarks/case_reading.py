"""CPU per case of reading a JSONL case file, as a ratio to the least any reader does.

    python benchmarks/case_reading.py                      # 10,000 cases (held) and 100,000 (streamed)
    python benchmarks/case_reading.py --cases 1000000 --repeat 3

The case file is the no-op benchmark's (benchmarks/run.py). Measured in this process, each the
best CPU time (user + sys) of ``--repeat`` rounds, in microseconds per case:

- ``reference``: each line read and given to ``json.loads``, nothing checked, nothing built;
- ``check``: the suite's read of the file: a small file read whole into its cases, a large one
  checked in one streaming pass (:meth:`CaseStream.check`), every line parsed strictly, every case
  built and handed to a check that does nothing (an evaluator's own check is its cost), duplicate
  ids looked for;
- ``run's pass``: a large file read again by the run (a small one is held: nothing to read).

A figure is the best of the rounds, so an import made once per process (numpy's, say) is not in it.

Each is printed with its ratio to the reference measured in the same run, so the figures compare
across machines. Informative only: the script exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import make_project

from oloproof_core.config.cases import CaseStream, load_cases


def cpu() -> float:
    return time.process_time()


def reference(path: Path) -> None:
    with path.open("rb") as handle:
        for raw in handle:
            json.loads(raw)


def check(project: Path) -> CaseStream | list:
    cases = load_cases("cases.jsonl", project)
    if isinstance(cases, CaseStream):
        cases.check(lambda case: None)  # as a suite with an evaluator that checks the cases calls it
    return cases


def run_pass(cases: CaseStream | list) -> None:
    if isinstance(cases, CaseStream):
        for _ in cases:
            pass


def measure(project: Path, n: int, repeat: int) -> dict[str, float]:
    best = {"reference": float("inf"), "check": float("inf"), "run's pass": float("inf")}
    for _ in range(repeat):
        start = cpu()
        reference(project / "cases.jsonl")
        checked = cpu()
        cases = check(project)
        read = cpu()
        run_pass(cases)
        end = cpu()
        for name, seconds in (("reference", checked - start), ("check", read - checked), ("run's pass", end - read)):
            best[name] = min(best[name], seconds * 1e6 / n)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[10_000, 100_000], metavar="N")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.repeat < 1 or min(args.cases) < 1:
        parser.error("--repeat and --cases must be at least 1")
    with tempfile.TemporaryDirectory(prefix="oloproof-case-reading-") as work:
        for n in args.cases:
            project = make_project(Path(work) / f"noop-{n}", n, None)
            size = (project / "cases.jsonl").stat().st_size
            figures = measure(project, n, args.repeat)
            kind = "streamed" if isinstance(load_cases("cases.jsonl", project), CaseStream) else "held"
            print(f"{n:,} cases ({size / 1e6:.1f} MB, {kind}), CPU per case, best of {args.repeat}:")
            for name, value in figures.items():
                if name == "run's pass" and kind == "held":
                    print(f"  {name:<11} held: nothing to read")
                    continue
                print(f"  {name:<11} {value:6.2f} µs  {value / figures['reference']:5.2f}× reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Oloproof's speed targets, each as a ratio to a reference measured in the same run.

    python benchmarks/targets.py                  # every target, medians of 3 (what `nox -s bench` runs)
    python benchmarks/targets.py --repeat 1 --large 20000 --json targets.json   # a quicker look

Every figure is printed with its target and PASS or MISS; the script exits 0 whatever the figures
are (it fails only if something crashes). References and runs alternate (reference, Oloproof,
reference, Oloproof, ...), so a change of the machine's load moves both sides of each ratio; the
load average is printed at the start and the end.

- HTTP, 1,000 cases against a local stand-in service (benchmarks/http_bench.py's server, in its own
  process) at 50 ms with concurrency 16 and 64: wall of ``oloproof run`` ÷ wall of a bare aiohttp
  client loop sending the same 1,000 requests (the cases' inputs as JSON bodies, to the same server)
  at the same concurrency (a whole ``python`` process too: start-up, ``import aiohttp``, the loop),
  target ≤ 1.2; at 0 ms and concurrency 64, the
  throughput of ``oloproof run`` ÷ the bare loop's, target ≥ 0.8;
- a cached re-run of 1,000 cases (a no-op callable, every execution and judgment from the caches):
  its wall minus the wall of ``oloproof --help``, target ≤ 0.5 s;
- the framework's CPU per case, on a no-op callable at 10,000 and 100,000 cases: (CPU of the cold
  N-case ``oloproof run`` - CPU of the cold 1-case run) ÷ N, target < 0.1 ms;
- start-up of ``--help``, ``runs``, ``plugins`` and ``inspect`` of one case (wall), target < 0.3 s;
- a 1-case run, cold store (wall), target < 0.6 s;
- peak memory: the largest RSS of any ``oloproof run`` above (informative: flat memory at scale is
  another issue's).

Every child is a subprocess whose wall time, CPU time (user + sys) and peak RSS come from
``os.wait4``. Bytecode is written on the warm-up runs (``PYTHONDONTWRITEBYTECODE`` is dropped for
the children), as for an installed package.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import http_bench  # the stand-in server and the HTTP projects
from common import (Child, child_env, fmt, load_average, log, make_project, oloproof_command, save_json, table,
                 workdir)

HTTP_CASES = 1000
CACHED_CASES = 1000


def env() -> dict:
    return child_env()


def olo(argv: list[str], cwd: Path) -> Child:
    return Child([*oloproof_command(), *argv], cwd=cwd, env=env()).check()


def cold(project: Path) -> Child:
    shutil.rmtree(project / ".oloproof", ignore_errors=True)
    child = olo(["run"], project)
    if "Missing:" in child.stdout:  # a run whose cases fail is fast: its figures would mean nothing
        raise RuntimeError(f"`oloproof run` in {project.name} missed cases:\n{child.stdout[-2000:]}")
    return child


def bare_loop(url: str, concurrency: int, requests: int) -> Child:
    """The reference: a bare aiohttp client loop, a whole Python process like ``oloproof run``."""
    return Child([sys.executable, http_bench.__file__, "loop", "--transport", "aiohttp", "--url", url,
                  "--concurrency", str(concurrency), "--requests", str(requests)], env=env()).check()


def med(children: list[Child], attribute: str = "seconds") -> float:
    return statistics.median(getattr(c, attribute) for c in children)


def spread(children: list[Child]) -> str:
    values = sorted(c.seconds for c in children)
    return f"{', '.join(f'{v:.2f}' for v in values)} s"


class Figures:
    def __init__(self):
        self.rows: list[dict] = []

    def add(self, label: str, measured: float, unit: str, comparison: str | None, target: float | None,
            note: str) -> None:
        if comparison is None:
            verdict = "INFO"
        else:
            met = {"≤": measured <= target, "<": measured < target, "≥": measured >= target}[comparison]
            verdict = "PASS" if met else "MISS"
        self.rows.append({"figure": label, "measured": measured, "unit": unit, "comparison": comparison,
                          "target": target, "verdict": verdict, "note": note})


def measure(work: Path, repeat: int, large: list[int]) -> dict:
    figures = Figures()
    load_before = load_average()
    rss: list[float] = []

    # -- HTTP: Oloproof and the bare aiohttp loop, interleaved --------------------------------------
    for latency, concurrencies in ((50, (16, 64)), (0, (64,))):
        server = http_bench.Server(latency)
        try:
            for concurrency in concurrencies:
                project = http_bench.make_project(work / f"http-{latency}ms-c{concurrency}", server.url,
                                                  HTTP_CASES, concurrency)
                cold(project)  # warm-up: bytecode, page cache, the server's connections
                bare_loop(server.url, concurrency, HTTP_CASES)
                loops, runs = [], []
                for round_ in range(repeat):
                    log(f"HTTP {latency} ms, concurrency {concurrency}: round {round_ + 1}/{repeat} ...")
                    loops.append(bare_loop(server.url, concurrency, HTTP_CASES))
                    runs.append(cold(project))
                rss += [c.max_rss_mb for c in runs]
                wall, reference = med(runs), med(loops)
                inner = statistics.median(json.loads(c.stdout)["requests_per_s"] for c in loops)
                note = (f"oloproof run {spread(runs)} (CPU {med(runs, 'cpu'):.2f} s); bare loop {spread(loops)} "
                        f"(CPU {med(loops, 'cpu'):.2f} s; {inner:.0f} req/s inside its loop)")
                if latency:
                    figures.add(f"HTTP {HTTP_CASES} cases, {latency} ms, concurrency {concurrency}: "
                                "wall ÷ bare loop wall", wall / reference, "×", "≤", 1.2, note)
                else:
                    figures.add(f"HTTP {HTTP_CASES} cases, 0 ms, concurrency {concurrency}: "
                                "throughput ÷ bare loop's", reference / wall, "×", "≥", 0.8,
                                f"{HTTP_CASES / wall:.0f} cases/s against {HTTP_CASES / reference:.0f}; {note}")
        finally:
            server.stop()

    # -- start-up and the 1-case run ------------------------------------------------------------
    one = make_project(work / "one-case", 1, None)
    cold(one)  # warm-up
    commands = {"--help": ["--help"], "runs": ["runs"], "plugins": ["plugins"],
                "inspect (one case)": ["inspect", "latest", "--case", "case-000000"]}
    for argv in commands.values():
        olo(argv, one)  # warm-up
    timings: dict[str, list[Child]] = {name: [] for name in commands}
    ones: list[Child] = []
    for round_ in range(repeat):
        log(f"start-up and the 1-case run: round {round_ + 1}/{repeat} ...")
        for name, argv in commands.items():
            timings[name].append(olo(argv, one))
        shutil.rmtree(one / ".oloproof", ignore_errors=True)
        ones.append(olo(["run"], one))
    for name, children in timings.items():
        figures.add(f"start-up: oloproof {name}, wall", med(children), "s", "<", 0.3,
                    f"{spread(children)}; CPU {med(children, 'cpu'):.3f} s")
    figures.add("1-case run, cold store, wall", med(ones), "s", "<", 0.6,
                f"{spread(ones)}; CPU {med(ones, 'cpu'):.3f} s")

    # -- the cached re-run, beside --help -------------------------------------------------------
    project = make_project(work / f"cached-{CACHED_CASES}", CACHED_CASES, None)
    cold(project)
    olo(["run"], project)  # warm-up of the cached path
    reruns, helps = [], []
    for round_ in range(repeat):
        log(f"cached re-run of {CACHED_CASES} cases: round {round_ + 1}/{repeat} ...")
        helps.append(olo(["--help"], project))
        reruns.append(olo(["run"], project))
    line = next((x for x in reruns[0].stdout.splitlines() if x.startswith("Cache:")), "")
    if f"execution {CACHED_CASES} hit/0 miss" not in line or f"judgment {CACHED_CASES} hit/0 miss" not in line:
        log(f"warning: the re-run was not fully cached: {line}")
    figures.add(f"cached re-run of {CACHED_CASES} cases, wall - oloproof --help wall", med(reruns) - med(helps),
                "s", "≤", 0.5, f"re-run {spread(reruns)} (CPU {med(reruns, 'cpu'):.2f} s); --help {spread(helps)}; "
                f"{line}")

    # -- framework CPU per case on a no-op callable ----------------------------------------------
    for n in large:
        project = make_project(work / f"noop-{n}", n, None)
        cold(project)  # warm-up
        bigs, smalls = [], []
        for round_ in range(repeat):
            log(f"no-op callable, {n} cases: round {round_ + 1}/{repeat} ...")
            shutil.rmtree(one / ".oloproof", ignore_errors=True)
            smalls.append(olo(["run"], one))
            bigs.append(cold(project))
        rss += [c.max_rss_mb for c in bigs]
        per_case = (med(bigs, "cpu") - med(smalls, "cpu")) * 1000 / n
        figures.add(f"no-op callable, {n:,} cases: framework CPU per case", per_case, "ms/case", "<", 0.1,
                    f"(CPU {med(bigs, 'cpu'):.2f} s - 1-case CPU {med(smalls, 'cpu'):.2f} s) ÷ {n}; "
                    f"wall {spread(bigs)}; peak RSS {max(c.max_rss_mb for c in bigs):.0f} MiB")

    figures.add("peak memory: the largest RSS of any oloproof run above", max(rss), "MiB", None, None,
                f"of {len(rss)} runs")
    return {"figures": figures.rows, "repeat": repeat,
            "environment": {"python": sys.version.split()[0], "cpus": os.cpu_count(),
                            "load_average_start": load_before, "load_average_end": load_average()}}


def report(result: dict) -> None:
    environment = result["environment"]
    print(f"Oloproof speed targets (medians of {result['repeat']}; Python {environment['python']}, "
          f"{environment['cpus']} CPUs; load average at the start {environment['load_average_start']}, "
          f"at the end {environment['load_average_end']})")
    rows = [[f["figure"], fmt(f["measured"], f["unit"]),
             "—" if f["comparison"] is None else f"{f['comparison']} {fmt(f['target'], f['unit'])}", f["verdict"]]
            for f in result["figures"]]
    print(table(["figure", "measured", "target", "verdict"], rows))
    for f in result["figures"]:
        print(f"- {f['figure']}: {f['note']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, metavar="K", help="runs of each kind; medians (3)")
    parser.add_argument("--large", type=int, nargs="+", default=[10_000, 100_000], metavar="N",
                        help="cases of the no-op projects (10000 100000)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument("--workdir", metavar="DIR", help="generate the projects in DIR and keep them")
    args = parser.parse_args(argv)
    if args.repeat < 1 or min(args.large) < 1:
        parser.error("--repeat and --large must be at least 1")
    with workdir(args.workdir, "oloproof-targets-") as work:
        result = measure(work, args.repeat, args.large)
    report(result)
    save_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

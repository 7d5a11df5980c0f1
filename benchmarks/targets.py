"""Oloproof's speed targets, each as a ratio to references measured in the same run.

    python benchmarks/targets.py                  # every target, medians of 3 (what `nox -s bench` runs)
    python benchmarks/targets.py --repeat 1 --large 20000 200000 --json targets.json   # a quicker look
    python benchmarks/targets.py --quick          # the per-case figures alone (0 ms c64 at 10,000; no-op CPU at 100,000)

Every figure is printed with its target and PASS or MISS; the script exits 0 whatever the figures
are (it fails only if something crashes). References and runs alternate (bare loop, floor,
Oloproof, bare loop, ...), so a change of the machine's load moves every side of each ratio; the
load average is printed at the start and the end. The two references:

- the **bare loop**: the least that calls the system at all (http_bench.py's aiohttp client loop
  sending the cases' inputs as JSON bodies; for the no-op callable, ``floor.py --bare``: each case
  file line parsed and the function called);
- the **recording floor** (benchmarks/floor.py): the bare loop plus the least a framework that
  records each case must do: the input serialised once (body and cache key), the response parsed,
  the output serialised once, the ``contains`` judgment, one record row and one execution-cache row
  a case into SQLite (WAL, 500 cases a transaction).

Each is a whole ``python`` process, like ``oloproof run`` (start-up, imports, the loop, the exit).
The figures:

- HTTP against a local stand-in service (http_bench.py's server, in its own process), one
  ``contains`` evaluator: 1,000 cases at 50 ms, concurrency 16 and 64: wall of ``oloproof run`` ÷
  the bare loop's, target ≤ 1.1 (and ÷ the floor's, shown); 10,000 cases at 0 ms, concurrency 64:
  throughput ÷ the bare loop's, target ≥ 0.8, and ÷ the floor's, target ≥ 0.85; the CPU of each
  as a ratio to both references;
- a cached re-run of 1,000 cases (a no-op callable, every execution from the cache; ``contains`` is
  made again, as it is on every run):
  its wall minus the wall of ``oloproof --help``, target ≤ 0.5 s;
- CPU per case on a no-op callable at 100,000 and 1,000,000 cases: (CPU of the cold N-case
  process - CPU of the cold 1-case process) ÷ N, for ``oloproof run``, the floor and the bare
  loop; Oloproof's ÷ the floor's, target ≤ 2 (÷ the bare loop's shown), and < 0.1 ms;
- start-up of ``--help``, ``runs``, ``plugins`` and ``inspect`` of one case (wall), target < 0.3 s;
- a 1-case run, cold store (wall), target < 0.6 s;
- peak memory of the no-op runs at the largest size, target ≤ 200 MB, and its growth from the
  smallest size, target ≤ 1.2×; ``compare`` of two runs of the largest size, target ≤ 200 MB.

Every child is a subprocess whose wall time, CPU time (user + sys) and peak RSS come from
``os.wait4``. Bytecode is written on the warm-up runs (``PYTHONDONTWRITEBYTECODE`` is dropped for
the children), as for an installed package. On an idle 2-core machine the whole set takes about
fifteen minutes (one run of each kind, ``--repeat 1``: about seven), the million-case runs most of
it.
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

FLOOR = str(Path(__file__).resolve().parent / "floor.py")
SLOW_CASES = 1000  # HTTP at 50 ms
FAST_CASES = 10_000  # HTTP at 0 ms: enough requests that start-up does not decide the throughput
CACHED_CASES = 1000
POLICY = """version: 1
confidence_level: 0.95
block_on: [FAIL]
rules:
  - {id: not-worse, kind: non-inferiority, metric: ok, margin: 2.0}
"""


def env() -> dict:
    return child_env()


def olo(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> Child:
    return Child([*oloproof_command(), *argv], cwd=cwd, env=env()).check(ok)


def cold(project: Path, argv: tuple[str, ...] = ()) -> Child:
    shutil.rmtree(project / ".oloproof", ignore_errors=True)
    child = olo(["run", *argv], project)
    if "Missing:" in child.stdout:  # a run whose cases fail is fast: its figures would mean nothing
        raise RuntimeError(f"`oloproof run` in {project.name} missed cases:\n{child.stdout[-2000:]}")
    return child


def bare_loop(url: str, concurrency: int, requests: int) -> Child:
    """The reference: a bare aiohttp client loop, a whole Python process like ``oloproof run``."""
    return Child([sys.executable, http_bench.__file__, "loop", "--transport", "aiohttp", "--url", url,
                  "--concurrency", str(concurrency), "--requests", str(requests)], env=env()).check()


def floor(system: str, project: Path, *extra: str) -> Child:
    """The recording floor (floor.py) over the project's case file; ``--bare``: the no-op's bare loop."""
    child = Child([sys.executable, FLOOR, system, "--cases", str(project / "cases.jsonl"), *extra], env=env()).check()
    result = json.loads(child.stdout)
    if "--bare" not in extra and result["passed"] != result["cases"]:
        raise RuntimeError(f"the floor judged {result['passed']} of {result['cases']} cases passed")
    return child


def run_id(child: Child) -> str:
    return child.stdout.splitlines()[0].split()[1]  # Run run_01... [STATE]


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


def http_figures(figures: Figures, work: Path, repeat: int, rss: list[float], quick: bool = False) -> None:
    """Oloproof, the bare loop and the floor against the stand-in service, interleaved (``quick``:
    only 0 ms, concurrency 64)."""
    sets = ((50, SLOW_CASES, (16, 64)), (0, FAST_CASES, (64,)))
    for latency, cases, concurrencies in sets[1:] if quick else sets:
        server = http_bench.Server(latency)
        try:
            for concurrency in concurrencies:
                project = http_bench.make_project(work / f"http-{latency}ms-c{concurrency}", server.url, cases,
                                                  concurrency)
                cold(project)  # warm-up: bytecode, page cache, the server's connections
                bare_loop(server.url, concurrency, cases)
                floor("http", project, "--url", server.url, "--concurrency", str(concurrency))
                loops, floors, runs = [], [], []
                for round_ in range(repeat):
                    log(f"HTTP {cases} cases, {latency} ms, concurrency {concurrency}: round {round_ + 1}/{repeat} ...")
                    loops.append(bare_loop(server.url, concurrency, cases))
                    floors.append(floor("http", project, "--url", server.url, "--concurrency", str(concurrency)))
                    runs.append(cold(project))
                rss += [c.max_rss_mb for c in runs]
                wall, loop_wall, floor_wall = med(runs), med(loops), med(floors)
                cpu, loop_cpu, floor_cpu = med(runs, "cpu"), med(loops, "cpu"), med(floors, "cpu")
                what = f"HTTP {cases:,} cases, {latency} ms, concurrency {concurrency}"
                note = (f"oloproof run {spread(runs)} (CPU {cpu:.2f} s); bare loop {spread(loops)} (CPU "
                        f"{loop_cpu:.2f} s); floor {spread(floors)} (CPU {floor_cpu:.2f} s)")
                if latency:
                    figures.add(f"{what}: wall ÷ bare loop's", wall / loop_wall, "×", "≤", 1.1, note)
                    figures.add(f"{what}: wall ÷ floor's", wall / floor_wall, "×", None, None,
                                f"the floor's wall ÷ the bare loop's: {floor_wall / loop_wall:.2f}×")
                else:
                    rates = (f"{cases / wall:.0f} cases/s; bare loop {cases / loop_wall:.0f}; "
                             f"floor {cases / floor_wall:.0f}")
                    figures.add(f"{what}: throughput ÷ bare loop's", loop_wall / wall, "×", "≥", 0.8,
                                f"{rates}; {note}")
                    figures.add(f"{what}: throughput ÷ floor's", floor_wall / wall, "×", "≥", 0.85,
                                f"the floor's throughput ÷ the bare loop's: {loop_wall / floor_wall:.2f}×")
                figures.add(f"{what}: CPU ÷ bare loop's", cpu / loop_cpu, "×", None, None,
                            f"{cpu:.2f} s ÷ {loop_cpu:.2f} s")
                figures.add(f"{what}: CPU ÷ floor's", cpu / floor_cpu, "×", None, None,
                            f"{cpu:.2f} s ÷ {floor_cpu:.2f} s; the floor's ÷ the bare loop's: "
                            f"{floor_cpu / loop_cpu:.2f}×")
        finally:
            server.stop()


def noop_figures(figures: Figures, work: Path, repeat: int, large: list[int], one: Path, quick: bool = False) -> None:
    """CPU per case of Oloproof, the floor and the bare loop on a no-op callable; peak memory;
    compare of two runs of the largest size (not with ``quick``)."""
    peaks: dict[int, float] = {}
    for n in large:
        project = make_project(work / f"noop-{n}", n, None)  # its case file just written: in the page cache
        kinds: dict[str, dict[str, list[Child]]] = {k: {"one": [], "all": []} for k in ("oloproof", "floor", "bare")}
        for round_ in range(repeat):
            log(f"no-op callable, {n:,} cases: round {round_ + 1}/{repeat} ...")
            kinds["bare"]["one"].append(floor("noop", one, "--bare"))
            kinds["bare"]["all"].append(floor("noop", project, "--bare"))
            kinds["floor"]["one"].append(floor("noop", one))
            kinds["floor"]["all"].append(floor("noop", project))
            shutil.rmtree(one / ".oloproof", ignore_errors=True)
            kinds["oloproof"]["one"].append(olo(["run"], one))
            kinds["oloproof"]["all"].append(cold(project))
        per_case = {k: (med(v["all"], "cpu") - med(v["one"], "cpu")) * 1000 / n for k, v in kinds.items()}
        runs = kinds["oloproof"]["all"]
        last = runs[-1]
        peaks[n] = max(c.max_rss_mb for c in runs)
        detail = "; ".join(f"{k} (CPU {med(v['all'], 'cpu'):.2f} s - 1-case CPU {med(v['one'], 'cpu'):.3f} s) ÷ {n} "
                           f"= {per_case[k]:.4f} ms" for k, v in kinds.items())
        figures.add(f"no-op callable, {n:,} cases: CPU per case ÷ floor's", per_case["oloproof"] / per_case["floor"],
                    "×", "≤", 2.0, detail)
        figures.add(f"no-op callable, {n:,} cases: CPU per case ÷ bare loop's",
                    per_case["oloproof"] / per_case["bare"], "×", None, None,
                    f"the floor's ÷ the bare loop's: {per_case['floor'] / per_case['bare']:.2f}×")
        figures.add(f"no-op callable, {n:,} cases: framework CPU per case", per_case["oloproof"], "ms/case", "<", 0.1,
                    f"wall {spread(runs)}; peak RSS {peaks[n]:.0f} MiB; the floor's peak RSS "
                    f"{max(c.max_rss_mb for c in kinds['floor']['all']):.0f} MiB")
    if quick:
        return
    small, big = min(large), max(large)
    figures.add(f"peak memory of the no-op runs at {big:,} cases", peaks[big], "MiB", "≤", 200,
                f"the largest RSS of {repeat} runs; at {small:,} cases {peaks[small]:.1f} MiB")
    if big != small:
        figures.add(f"peak memory, {big:,} cases ÷ {small:,}", peaks[big] / peaks[small], "×", "≤", 1.2,
                    f"{peaks[big]:.1f} MiB ÷ {peaks[small]:.1f} MiB")
    # compare: the last cold run and a re-run of the same project (from the caches), in one store
    project = work / f"noop-{big}"
    (project / "policy.yaml").write_text(POLICY, encoding="utf-8")
    log(f"compare of two {big:,}-case runs ...")
    first = run_id(last)
    second = run_id(olo(["run"], project))
    child = olo(["compare", second, first, "--policy", "policy.yaml"], project, ok=(0, 1, 3))
    figures.add(f"compare of two {big:,}-case runs: peak memory", child.max_rss_mb, "MiB", "≤", 200,
                f"wall {child.seconds:.1f} s, CPU {child.cpu:.1f} s")


def measure(work: Path, repeat: int, large: list[int], quick: bool = False) -> dict:
    figures = Figures()
    load_before = load_average()
    rss: list[float] = []

    http_figures(figures, work, repeat, rss, quick)
    if quick:  # the per-case figures alone: 10,000 requests at 0 ms, the no-op CPU per case
        one = make_project(work / "one-case", 1, None)
        cold(one)  # warm-up
        noop_figures(figures, work, repeat, large, one, quick)
        return {"figures": figures.rows, "repeat": repeat, "quick": True,
                "environment": {"python": sys.version.split()[0], "cpus": os.cpu_count(),
                                "load_average_start": load_before, "load_average_end": load_average()}}

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
    if f"execution {CACHED_CASES} hit/0 miss" not in line:  # contains is made again (not cached): its misses
        log(f"warning: the re-run was not fully cached: {line}")
    figures.add(f"cached re-run of {CACHED_CASES} cases, wall - oloproof --help wall", med(reruns) - med(helps),
                "s", "≤", 0.5, f"re-run {spread(reruns)} (CPU {med(reruns, 'cpu'):.2f} s); --help {spread(helps)}; "
                f"{line}")

    noop_figures(figures, work, repeat, large, one)
    figures.add("peak memory of the HTTP runs", max(rss), "MiB", None, None, f"the largest RSS of {len(rss)} runs")
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
    parser.add_argument("--large", type=int, nargs="+", default=None, metavar="N",
                        help="cases of the no-op projects (100000 1000000)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument("--workdir", metavar="DIR", help="generate the projects in DIR and keep them")
    parser.add_argument("--quick", action="store_true",
                        help="only the per-case figures: HTTP 0 ms c64 throughput at 10,000 cases and the no-op "
                             "CPU per case (at 100000 unless --large says otherwise); no memory, start-up or compare")
    args = parser.parse_args(argv)
    if args.large is None:
        args.large = [100_000] if args.quick else [100_000, 1_000_000]
    if args.repeat < 1 or min(args.large) < 1:
        parser.error("--repeat and --large must be at least 1")
    with workdir(args.workdir, "oloproof-targets-") as work:
        result = measure(work, args.repeat, sorted(set(args.large)), args.quick)
    report(result)
    save_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

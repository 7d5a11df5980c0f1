"""Oloproof's speed figures: framework overhead per case, cached re-run, start-up, peak memory.

Informative only: every figure is printed beside its target with the ratio measured/target, and
the script exits 0 whatever the figures are (it fails only if something crashes).

    python benchmarks/run.py                      # 10,000 cases, 3 runs of each kind
    python benchmarks/run.py --cases 2000 --json figures.json
    python benchmarks/run.py --workdir bench-projects   # keep the generated projects to profile them
    python benchmarks/run.py --no-http            # without the http system's figures (http_bench.py)

What is measured (every ``oloproof`` call is a subprocess; wall time, and the child's CPU time and
peak RSS from ``os.wait4``):

- start-up: ``oloproof --help``, median of ``--startup-runs`` runs, and the slowest imports of
  ``python -X importtime -c "import oloproof_core.cli"`` (and of ``-m oloproof run``);
- fixed cost of a run: ``oloproof run`` of the same project with 1 case and an empty store
  (interpreter, imports, plugins, config, store creation, report), measured up front and again
  before every cold N-case run; the median is what the per-case figures subtract;
- overhead per case: (cold ``oloproof run`` of the N-case project - fixed cost) / N, for the
  default concurrency and for ``concurrency: 1``. The system is a no-op callable returning a
  constant dict and the one evaluator is ``contains``, so the time is the framework's own;
- cached re-run: ``oloproof run`` again on the default project, every execution served from the
  cache (``contains`` is made again, as on every run);
- peak memory: max RSS of the cold N-case ``oloproof run``.

Wall times on a shared or small machine are noisy: the table prints medians, the notes the
spread, and the CPU figures (user+sys of the child) move far less with the load.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
from pathlib import Path
from common import (Child, child_env, fmt, fresh_store, load_average, log, make_project, oloproof_command,
                    save_json, table, workdir)

TARGETS = {  # figure -> (target, unit)
    "overhead_per_case_ms": (0.2, "ms/case"),
    "overhead_per_case_c1_ms": (0.2, "ms/case"),
    "cached_rerun_s": (2.0, "s"),
    "startup_help_s": (0.3, "s"),
}


# -- helpers ------------------------------------------------------------------------------------


def oloproof_run(project: Path) -> Child:
    child = Child([*oloproof_command(), "run"], cwd=project, env=child_env()).check()
    if "Cache:" not in child.stdout:
        raise RuntimeError(f"`oloproof run` in {project.name} printed no cache line:\n{child.stdout[-2000:]}")
    return child


def cache_line(child: Child) -> str:
    return next((line for line in child.stdout.splitlines() if line.startswith("Cache:")), "")


def import_times(argv: list[str], top: int, cwd: Path | None = None) -> dict:
    """The slowest imports of ``python -X importtime ...`` (run twice: the first warms the caches)."""
    Child(argv, cwd=cwd, env=child_env()).check()
    child = Child(argv, cwd=cwd, env=child_env()).check()
    rows = []
    for line in child.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            rows.append({"module": match.group(4), "self_ms": int(match.group(1)) / 1000,
                         "cumulative_ms": int(match.group(2)) / 1000, "depth": len(match.group(3)) // 2})
    total = sum(r["self_ms"] for r in rows)
    by_cumulative = sorted(rows, key=lambda r: r["cumulative_ms"], reverse=True)[:top]
    by_self = sorted(rows, key=lambda r: r["self_ms"], reverse=True)[:top]
    return {"total_self_ms": round(total, 1), "modules": len(rows), "slowest_cumulative": by_cumulative,
            "slowest_self": by_self}


def spread(children: list[Child]) -> str:
    values = sorted(c.seconds for c in children)
    if len(values) == 1:
        return f"{values[0]:.3f} s (1 run)"
    return f"median {statistics.median(values):.3f} s of {len(values)} (min {values[0]:.3f}, max {values[-1]:.3f})"


# -- the benchmark ------------------------------------------------------------------------------


def measure(args: argparse.Namespace, work: Path) -> dict:
    n = args.cases
    olo = oloproof_command()
    load_before = load_average()
    figures: dict[str, dict] = {}

    def figure(name: str, measured: float | None, unit: str, note: str, target: float | None = None) -> None:
        if name in TARGETS:
            target, unit = TARGETS[name]
        ratio = measured / target if (measured is not None and target) else None
        figures[name] = {"measured": measured, "unit": unit, "target": target, "ratio": ratio, "note": note}

    # 3. start-up -------------------------------------------------------------------------------
    log(f"start-up: {' '.join(olo)} --help x{args.startup_runs} ...")
    Child([*olo, "--help"], env=child_env()).check()  # warm-up (bytecode, page cache)
    helps = [Child([*olo, "--help"], env=child_env()).check() for _ in range(args.startup_runs)]
    help_s = statistics.median(c.seconds for c in helps)
    figure("startup_help_s", help_s, "s", f"`oloproof --help`: {spread(helps)}")
    log("import times: python -X importtime -c 'import oloproof_core.cli' ...")
    imports = {"help": {"command": "python -X importtime -c 'import oloproof_core.cli'",
                        **import_times([sys.executable, "-X", "importtime", "-c", "import oloproof_core.cli"],
                                       args.top_imports)}}

    # fixed cost of `oloproof run`: the same project with 1 case, empty store -----------------------
    # Measured up front and again before every cold N-case run, so that a change of machine load
    # during the benchmark moves both sides of the subtraction.
    log(f"fixed cost: oloproof run on a 1-case project x{args.baseline_runs} ...")
    one = make_project(work / "one-case", 1, None)
    oloproof_run(one)  # warm-up: writes app.py's bytecode, warms the page cache
    baselines: list[Child] = []

    def baseline() -> None:
        fresh_store(one)
        baselines.append(oloproof_run(one))

    for _ in range(args.baseline_runs):
        baseline()
    log("import times: python -X importtime -m oloproof run (1-case project) ...")
    imports["run"] = {"command": "python -X importtime -m oloproof run  (in the 1-case project)",
                      **import_times([sys.executable, "-X", "importtime", "-m", "oloproof", "run"],
                                     args.top_imports, cwd=one)}

    # 1. overhead per case, default concurrency and concurrency 1 ---------------------------------
    variants = {"default": (make_project(work / f"cases-{n}-default", n, None), "default concurrency"),
                "c1": (make_project(work / f"cases-{n}-c1", n, 1), "concurrency: 1")}
    colds: dict[str, list[Child]] = {label: [] for label in variants}
    for round_ in range(args.repeat):
        for label, (project, what) in variants.items():
            log(f"cold run {round_ + 1}/{args.repeat}: {n} cases, {what} (after a 1-case run) ...")
            baseline()
            fresh_store(project)
            colds[label].append(oloproof_run(project))

    fixed_s = statistics.median(c.seconds for c in baselines)
    fixed_min = min(c.seconds for c in baselines)
    fixed_cpu = statistics.median(c.cpu for c in baselines)
    fixed_rss = statistics.median(c.max_rss_mb for c in baselines)
    figure("run_fixed_cost_s", fixed_s, "s", f"cold `oloproof run`, 1 case: {spread(baselines)}; "
                                             f"CPU {fixed_cpu:.3f} s; subtracted from the N-case runs")
    details: dict = {"fixed_cost_wall_s": [round(c.seconds, 4) for c in baselines],
                     "fixed_cost_cpu_s": [round(c.cpu, 4) for c in baselines]}
    for label, runs in colds.items():
        what = variants[label][1]
        wall = statistics.median(c.seconds for c in runs)
        best = min(c.seconds for c in runs)
        cpu = statistics.median(c.cpu for c in runs)
        name = "overhead_per_case_ms" if label == "default" else "overhead_per_case_c1_ms"
        figure(name, (wall - fixed_s) * 1000 / n, "ms/case",
               f"{what}: (median {wall:.3f} s - {fixed_s:.3f} s) / {n}; N-case wall {spread(runs)}; "
               f"from the minima: {(best - fixed_min) * 1000 / n:.4f} ms/case; {cache_line(runs[0])}")
        figure(name.replace("_ms", "_cpu_ms"), (cpu - fixed_cpu) * 1000 / n, "ms/case",
               f"{what}: (CPU {cpu:.3f} s - {fixed_cpu:.3f} s) / {n}, user+sys of the child, all threads")
        details[f"cold_{label}_wall_s"] = [round(c.seconds, 4) for c in runs]
        details[f"cold_{label}_cpu_s"] = [round(c.cpu, 4) for c in runs]
        details[f"cold_{label}_max_rss_mib"] = [round(c.max_rss_mb, 1) for c in runs]

    # 2. the fully cached re-run of the default project ---------------------------------------------
    project = variants["default"][0]
    log(f"cached re-run: {n} cases x{args.repeat} ...")
    warms = [oloproof_run(project) for _ in range(args.repeat)]
    line = cache_line(warms[0])
    if f"execution {n} hit/0 miss" not in line:  # contains is made again (not cached): its misses
        log(f"warning: the re-run was not fully cached: {line}")
    warm_s = statistics.median(c.seconds for c in warms)
    figure("cached_rerun_s", warm_s, "s", f"re-run of the same project: {spread(warms)}; "
                                          f"CPU {statistics.median(c.cpu for c in warms):.3f} s; {line}")
    figure("cached_rerun_per_case_ms", (warm_s - fixed_s) * 1000 / n, "ms/case",
           f"({warm_s:.3f} s - fixed cost) / {n}")
    details["cached_rerun_wall_s"] = [round(c.seconds, 4) for c in warms]
    details["cached_rerun_cpu_s"] = [round(c.cpu, 4) for c in warms]

    # 4. peak memory ---------------------------------------------------------------------------
    peak = max(c.max_rss_mb for c in colds["default"])
    figure("peak_rss_mib", peak, "MiB", f"max RSS of the cold {n}-case run (os.wait4); "
                                        f"1-case run: {fixed_rss:.1f} MiB")
    figure("rss_per_case_kib", (peak - fixed_rss) * 1024 / n, "KiB/case", "(peak - 1-case peak) / N")
    figure("cached_rerun_peak_rss_mib", max(c.max_rss_mb for c in warms), "MiB", "max RSS of the cached re-run")

    return {
        "cases": n,
        "figures": figures,
        "details": details,
        "imports": imports,
        "environment": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": os.cpu_count(), "oloproof": olo[-1] if len(olo) == 1 else "python -m oloproof",
                        "load_average_before": load_before, "load_average_after": load_average()},
    }


def report(result: dict) -> None:
    n = result["cases"]
    labels = {
        "overhead_per_case_ms": "overhead per case, wall (default concurrency)",
        "overhead_per_case_c1_ms": "overhead per case, wall (concurrency 1)",
        "cached_rerun_s": f"cached re-run, {n} cases, wall",
        "startup_help_s": "start-up: oloproof --help, wall",
        "peak_rss_mib": f"peak RSS, cold {n}-case run",
        "overhead_per_case_cpu_ms": "overhead per case, CPU (default concurrency)",
        "overhead_per_case_c1_cpu_ms": "overhead per case, CPU (concurrency 1)",
        "run_fixed_cost_s": "fixed cost: oloproof run, 1 case, wall",
        "cached_rerun_per_case_ms": "cached re-run per case, wall",
        "rss_per_case_kib": "RSS growth per case",
        "cached_rerun_peak_rss_mib": "peak RSS, cached re-run",
    }
    rows = []
    for name, label in labels.items():
        f = result["figures"][name]
        ratio = f"{f['ratio']:.2f}x" if f["ratio"] is not None else "—"
        target = f"≤ {fmt(f['target'], f['unit'])}" if f["target"] is not None else "—"
        rows.append([label, fmt(f["measured"], f["unit"]), target, ratio])
    env = result["environment"]
    print(f"Oloproof speed figures ({n} cases, Python {env['python']}, {env['cpus']} CPUs, load average "
          f"{env['load_average_before']} -> {env['load_average_after']}); informative, never pass/fail")
    print(table(["figure", "measured", "target", "measured/target"], rows))
    print()
    for name, label in labels.items():
        print(f"- {label}: {result['figures'][name]['note']}")
    for imports in result["imports"].values():
        print()
        print(f"Slowest imports of `{imports['command']}` ({imports['modules']} modules, "
              f"{imports['total_self_ms']:.1f} ms of import time in all):")
        print(table(["module (by cumulative time)", "cumulative", "self"],
                    [[r["module"], f"{r['cumulative_ms']:.1f} ms", f"{r['self_ms']:.1f} ms"]
                     for r in imports["slowest_cumulative"]]))
        print(table(["module (by own time)", "self", "cumulative"],
                    [[r["module"], f"{r['self_ms']:.1f} ms", f"{r['cumulative_ms']:.1f} ms"]
                     for r in imports["slowest_self"]]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000, metavar="N", help="cases of the large project (10000)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument("--repeat", type=int, default=3, metavar="K",
                        help="cold and cached N-case runs of each kind; the median is reported (3)")
    parser.add_argument("--startup-runs", type=int, default=10, metavar="K", help="runs of oloproof --help (10)")
    parser.add_argument("--baseline-runs", type=int, default=5, metavar="K", help="runs of the 1-case project (5)")
    parser.add_argument("--top-imports", type=int, default=5, metavar="K", help="slowest imports to print (5)")
    parser.add_argument("--no-http", action="store_true", help="skip the http system's figures (http_bench.py)")
    parser.add_argument("--http-cases", type=int, default=1000, metavar="N", help="cases of the HTTP projects (1000)")
    parser.add_argument("--workdir", metavar="DIR",
                        help="generate the projects in DIR and keep them (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.cases < 1 or args.repeat < 1 or args.startup_runs < 1 or args.baseline_runs < 1:
        parser.error("--cases, --repeat, --startup-runs and --baseline-runs must be at least 1")

    with workdir(args.workdir, "oloproof-bench-") as work:
        result = measure(args, work)
    report(result)
    if not args.no_http:  # the http system against a local server: benchmarks/http_bench.py
        import http_bench

        with tempfile.TemporaryDirectory(prefix="oloproof-http-bench-") as tmp:
            result["http"] = http_bench.benchmark(Path(tmp), args.http_cases, args.repeat)
        http_bench.report(result["http"])
    save_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast the viewer's pages load for a large run, and how much memory it holds paging a huge one.

    python benchmarks/viewer_bench.py                     # 10,000 cases, 5 loads of each page
    python benchmarks/viewer_bench.py --cases 2000
    python benchmarks/viewer_bench.py --large 1000000     # and a 1,000,000-case run beside it

A no-op project (benchmarks/run.py's) is run once; ``oloproof view`` serves its store and each
page is fetched over HTTP: the run page's first load, the first sorted page (which builds the
store's index of the run), then, each the median of ``--repeat`` loads, the run page, sorted,
filtered and searched pages of the cases table, a late page, one case and the runs list. Each is
printed as a ratio to the run page's first load in the same run (target for sort, filter and
search: under 0.5 s a page) and to ``oloproof inspect RUN_ID`` (a whole process reading the run).

With ``--large N``: a second project of N cases, served by a viewer of its own: its run page's
first load (target: at most 1 s, and at most 2x the first load of the small run's page, measured in
the same run), then 100 pages of its cases table one after another, and the viewer's resident
memory after them (target: 200 MB); then how long until its failures are listed (the background
pass that builds the store's index of the run), and the viewer's peak memory by then.
Informative only: exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.request import urlopen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Child, child_env, load_average, make_project, oloproof_command

def fetch(url: str) -> float:
    start = time.perf_counter()
    with urlopen(url, timeout=120) as response:
        response.read()
    return time.perf_counter() - start


def read(url: str) -> str:
    with urlopen(url, timeout=120) as response:
        return response.read().decode("utf-8")


def rss_mb(pid: int) -> tuple[float, float]:
    """A process's resident memory now and at its peak (Linux /proc), in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


class Viewer:
    """``oloproof view --port 0`` on a project, for the duration of a ``with``."""

    def __init__(self, project: Path):
        self.project = project

    def __enter__(self) -> Viewer:
        self.proc = subprocess.Popen([*oloproof_command(), "view", "--port", "0"], cwd=self.project,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=child_env())
        self.base = re.search(r"http://\S+/", self.proc.stdout.readline()).group(0).rstrip("/")
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.proc.stdout.close()


def project_with_run(folder: Path, cases: int) -> tuple[Path, str]:
    project = make_project(folder, cases, None)
    run = Child([*oloproof_command(), "run"], cwd=project, env=child_env()).check((0, 1, 3))
    return project, re.search(r"run_[0-9A-Z]{26}", run.stdout).group(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--large", type=int, default=0, help="also a run of this many cases (1000000)")
    args = parser.parse_args(argv)
    print(f"# viewer_bench: {os.cpu_count()} cores, load average at start {load_average()}, {time.strftime('%Y-%m-%d')}")
    with tempfile.TemporaryDirectory(prefix="oloproof-viewer-") as folder:
        project, run_id = project_with_run(Path(folder) / "project", args.cases)
        inspect = []
        for _ in range(args.repeat):
            inspect.append(Child([*oloproof_command(), "inspect", run_id], cwd=project, env=child_env()).seconds)
        middle = f"case-{args.cases // 2:06d}"
        with Viewer(project) as viewer:
            base = viewer.base
            first = fetch(f"{base}/runs/{run_id}")
            built = fetch(f"{base}/runs/{run_id}?sort=ok")
            pages = {"run page (again)": f"/runs/{run_id}",
                     "sorted by ok, descending": f"/runs/{run_id}?sort=ok&desc=1",
                     "sorted by case, page 100": f"/runs/{run_id}?sort=case&page=100",
                     "filter passed, page 150": f"/runs/{run_id}?status=passed&page=150",
                     "filter ok=failed (none)": f"/runs/{run_id}?criterion=ok&status=failed",
                     "search one case's number": f"/runs/{run_id}?q={args.cases // 2}",
                     "search a group, sorted": f"/runs/{run_id}?q=g7&sort=case&desc=1",
                     "one case": f"/runs/{run_id}/cases/{middle}",
                     "runs list": "/"}
            figures = {name: statistics.median(fetch(base + path) for _ in range(args.repeat))
                       for name, path in pages.items()}
    reference = statistics.median(inspect)
    print(f"Viewer pages of a {args.cases:,}-case run (median of {args.repeat}); references in the same run: the "
          f"run page's first load {first:.3f} s, `oloproof inspect RUN_ID` {reference:.2f} s")
    print(f"  {'page':40} {'seconds':>8}  {'÷ first run page':>16}  {'÷ inspect':>9}")
    for name, seconds in {"run page, first load": first, "first sorted page (builds the index)": built,
                          **figures}.items():
        print(f"  {name:40} {seconds:8.3f}  {seconds / first:16.2f}  {seconds / reference:9.2f}")
    queried = [v for k, v in figures.items() if k.startswith(("sorted", "filter", "search"))]
    print(f"  slowest sort/filter/search page {max(queried):.3f} s (target < 0.5 s)")
    if args.large:
        large(args.large, first)
    print(f"# load average at end {load_average()}")
    return 0


def large(n: int, small_first: float) -> None:
    with tempfile.TemporaryDirectory(prefix="oloproof-viewer-large-") as folder:
        project, run_id = project_with_run(Path(folder) / "large", n)
        with Viewer(project) as viewer:
            first = fetch(f"{viewer.base}/runs/{run_id}")
            start = time.perf_counter()
            for page in range(2, 102):
                fetch(f"{viewer.base}/runs/{run_id}?page={page * 97}")
            paging = (time.perf_counter() - start) / 100
            now, peak = rss_mb(viewer.proc.pid)
            while 'id="failing"' not in (text := read(f"{viewer.base}/runs/{run_id}")) and 'id="reading"' in text \
                    and time.perf_counter() - start < 1800:
                time.sleep(5)
            listed = time.perf_counter() - start
            _, peak_after = rss_mb(viewer.proc.pid)
    print(f"A {n:,}-case run: run page first load {first:.3f} s (target <= 1 s), {first / small_first:.2f}x the "
          f"small run's first load (target <= 2); 100 pages of its cases table {paging:.3f} s a page; viewer RSS "
          f"after them {now:.0f} MB, peak {peak:.0f} MB (target <= 200 MB)")
    print(f"  its failures listed by the background pass (which builds the store's index) "
          f"{listed:.0f} s after the first page; viewer peak RSS by then {peak_after:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())

"""How fast the viewer's pages load for a large run, beside the command line reading the same run.

    python benchmarks/viewer_bench.py                # 10,000 cases, 5 loads of each page
    python benchmarks/viewer_bench.py --cases 2000

A no-op project (benchmarks/run.py's) is run once; ``oloproof view`` serves its store and each
page is fetched over HTTP: the runs list, the run page (first load: the run's records are read and
parsed; then served from the viewer's memory), a filtered and a late page of the cases table, and
one case. The reference, measured in the same run, is ``oloproof inspect RUN_ID`` (a whole
process reading the same run). Target: every page under 1 s. Informative only: exits 0 whatever
the figures are.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.request import urlopen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import make_project

TARGET_S = 1.0


def fetch(url: str) -> float:
    start = time.perf_counter()
    with urlopen(url, timeout=120) as response:
        response.read()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oloproof-viewer-") as folder:
        project = make_project(Path(folder) / "project", args.cases, None)
        run = subprocess.run([sys.executable, "-m", "oloproof", "run"], cwd=project, capture_output=True, text=True)
        run_id = re.search(r"run_[0-9A-Z]{26}", run.stdout).group(0)
        inspect = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "oloproof", "inspect", run_id], cwd=project, capture_output=True)
            inspect.append(time.perf_counter() - start)
        viewer = subprocess.Popen([sys.executable, "-u", "-m", "oloproof", "view", "--port", "0"], cwd=project,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            base = re.search(r"http://\S+/", viewer.stdout.readline()).group(0).rstrip("/")
            first = fetch(f"{base}/runs/{run_id}")
            pages = {"runs list": "/", "run page (cached records)": f"/runs/{run_id}",
                     "cases page 150, passed filter": f"/runs/{run_id}?status=passed&page=150",
                     "cases search": f"/runs/{run_id}?q=g7",
                     "one case": f"/runs/{run_id}/cases/case-{args.cases // 2:06d}"}
            figures = {name: statistics.median(fetch(base + path) for _ in range(args.repeat))
                       for name, path in pages.items()}
        finally:
            viewer.terminate()
            viewer.wait(timeout=20)
            viewer.stdout.close()
    reference = statistics.median(inspect)
    print(f"Viewer pages of a {args.cases:,}-case run (median of {args.repeat}; target {TARGET_S:.0f} s a page); "
          f"reference `oloproof inspect RUN_ID` {reference:.2f} s")
    print(f"  {'run page, first load (reads the run)':40} {first:6.3f} s  measured/target {first / TARGET_S:.2f}  "
          f"÷ inspect {first / reference:.2f}")
    for name, seconds in figures.items():
        print(f"  {name:40} {seconds:6.3f} s  measured/target {seconds / TARGET_S:.2f}  ÷ inspect {seconds / reference:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

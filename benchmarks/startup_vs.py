"""Start-up against a reference release: ``oloproof --help``, ``oloproof run --help`` and a 1-case
run, timed for this checkout and for a reference commit, each installed the same way (not
editable) into its own fresh virtualenv, interleaved in one pass, printed as medians and as the
ratio current / reference (below 1.0: faster).

    python benchmarks/startup_vs.py                      # against the commit before the layered core
    python benchmarks/startup_vs.py --reference HEAD~3 --repeat 21
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import fresh_store, log, make_project, table

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = "a8949a2"  # the last commit with the flat core and the single cli module


def venv_with(source: Path, where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    str(source)], check=True, capture_output=True)
    return where / "bin" / "oloproof"


def timed(argv: list[str], cwd: Path, before=None) -> float:
    if before:
        before()
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1, 3):
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference", default=REFERENCE, help="the commit to compare with")
    parser.add_argument("--repeat", type=int, default=15, help="runs of each command per side (medians)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oloproof-startup-") as tmp:
        work = Path(tmp)
        reference_src = work / "reference-src"
        subprocess.run(["git", "worktree", "add", "--detach", str(reference_src), args.reference], cwd=ROOT,
                       check=True, capture_output=True)
        try:
            log(f"installing {args.reference} and this checkout into fresh virtualenvs")
            current_src = work / "current-src"  # a copy: building never writes into the checkout
            shutil.copytree(ROOT, current_src, ignore=shutil.ignore_patterns(
                ".git", ".venv", ".ci-venv", ".nox", ".oloproof", "__pycache__", "*.egg-info", "build", "dist", "site"))
            sides = {"reference": venv_with(reference_src, work / "venv-reference"),
                     "current": venv_with(current_src, work / "venv-current")}
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(reference_src)], cwd=ROOT, check=False)
        project = make_project(work / "one-case", 1, None)
        commands = {"oloproof --help": (["--help"], None), "oloproof run --help": (["run", "--help"], None),
                    "1-case run": (["run"], lambda: fresh_store(project))}
        times: dict[tuple[str, str], list[float]] = {}
        for exe in sides.values():  # warm the file cache and the bytecode
            for argv, before in commands.values():
                timed([str(exe), *argv], project, before)
        for _ in range(args.repeat):
            for name, (argv, before) in commands.items():
                for side, exe in sides.items():
                    times.setdefault((name, side), []).append(timed([str(exe), *argv], project, before))
        rows = []
        for name in commands:
            ref, cur = (statistics.median(times[(name, side)]) for side in ("reference", "current"))
            rows.append([name, f"{ref * 1000:.1f} ms", f"{cur * 1000:.1f} ms", f"{cur / ref:.2f}×"])
        print(table(["command", f"reference ({args.reference})", "current", "current / reference"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

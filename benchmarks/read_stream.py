"""Peak memory of the reading commands on a small and a ten times larger run: flat when they stream.

    python benchmarks/read_stream.py                      # 20,000 and 200,000 cases
    python benchmarks/read_stream.py --sizes 5000 50000

For each size, two runs (the tests' fixture, tests/core/read_stream_data.py: fixed ids, seeded
records, the baseline in the candidate's order) are written through the local store's
``save_run``; then each command runs as a subprocess and its peak RSS is read from ``os.wait4``
(``ru_maxrss``). ``store only`` is a process that opens the store and iterates ``run_cases`` of
the candidate, keeping nothing: what reading the run costs the store itself, the floor under every
command. ``compare --join`` compares with a baseline stored shuffled (the join by id, whose memory
grows with the run: see docs/compare.md). ``compare, no change`` compares the candidate with itself: the
pairing alone, with no changed verdict to keep (in the fixture about a third of the pairs change
verdict on each criterion, and compare keeps every changed verdict, as the stored comparison lists
them). Informative only: the script exits 0 whatever the
figures are.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core"))
import read_stream_data as data  # the tests' fixture

OLOPROOF = str(Path(sys.executable).with_name("oloproof"))
STORE_ONLY = ("from oloproof_core.cli import Project\n"
              "for _ in Project('oloproof.yaml').reader().run_cases({run!r}):\n    pass\n")


def peak(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(peak RSS in MiB, wall seconds) of ``argv`` run in ``cwd``, its output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "NO_COLOR": "1"})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss / 1024, wall


def build(root: Path, n: int, order: str) -> None:
    """The fixture's two runs, written by a process of their own: a child's ``ru_maxrss`` starts at
    its parent's RSS when it forks, so this process keeps nothing of the runs."""
    code = (f"import sys; sys.path.insert(0, {str(Path(data.__file__).parent)!r}); import read_stream_data; "
            f"read_stream_data.build(__import__('pathlib').Path({str(root)!r}), n={n}, baseline_order={order!r})")
    subprocess.run([sys.executable, "-c", code], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[20_000, 200_000], metavar=("SMALL", "LARGE"))
    args = parser.parse_args()
    policy = ["--policy", "compare.yaml"]
    commands = {
        "store only": [sys.executable, "-c", STORE_ONLY.format(run=data.CANDIDATE)],
        "inspect": [OLOPROOF, "inspect", data.CANDIDATE],
        "inspect --failures": [OLOPROOF, "inspect", data.CANDIDATE, "--failures"],
        "inspect --format json": [OLOPROOF, "inspect", data.CANDIDATE, "--format", "json"],
        "inspect --case": [OLOPROOF, "inspect", data.CANDIDATE, "--case", "c00042"],
        "export": [OLOPROOF, "export", data.CANDIDATE],
        "compare": [OLOPROOF, "compare", data.CANDIDATE, data.BASELINE, *policy],
        "compare --join": [OLOPROOF, "compare", data.CANDIDATE, data.BASELINE, *policy],
        "compare, no change": [OLOPROOF, "compare", data.CANDIDATE, data.CANDIDATE, *policy],
    }
    print(f"# read_stream: load average at start {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d')}")
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            same, shuffled = Path(tmp) / f"same-{n}", Path(tmp) / f"shuffled-{n}"
            for root, order in ((same, "same"), (shuffled, "shuffled")):
                build(root, n, order)
            for name, argv in commands.items():
                figures[name].append(peak(argv, shuffled if name == "compare --join" else same))
    small, large = args.sizes
    print(f"{'command':<24} {f'MiB at {small:,}':>14} {f'MiB at {large:,}':>15} {'growth':>8} "
          f"{f's at {small:,}':>12} {f's at {large:,}':>13}")
    for name, ((m1, w1), (m2, w2)) in figures.items():
        print(f"{name:<24} {m1:>14.1f} {m2:>15.1f} {m2 / m1 - 1:>+8.0%} {w1:>12.2f} {w2:>13.2f}")
    print(f"# load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

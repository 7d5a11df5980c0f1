"""Writing cache rows to the local store: in the order they arrive, or sorted by key within each batch.

    python benchmarks/cache_rows.py                    # 100,000 rows in 500-row batches, medians of 3
    python benchmarks/cache_rows.py --rows 1000000 --batch 2000 --repeat 5

Each measurement writes ``--rows`` execution-shaped values (a small output, no artifact, the run
id) under sha256 keys, ``--batch`` rows a ``cache_put_many`` (one transaction each, as the cache
writer commits them), into a new local store, and takes the process CPU time (every thread) of the
writes alone. The two orders alternate (arrival, sorted, arrival, ...), each into a store of its
own, so a change of the machine's load moves both; what to read is the ratio of the medians,
sorted ÷ arrival (below 1.00: sorting pays). Informative only: the script exits 0 whatever the
figures are.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_average


def items(seed: str, n: int) -> list[tuple[str, dict]]:
    return [(hashlib.sha256(f"{seed}:{i}".encode()).hexdigest(),
             {"output": {"answer": f"ok {i}"}, "artifacts": {}, "seconds": 1e-6, "run": "run_0"}) for i in range(n)]


def write(rows: list[tuple[str, dict]], batch: int, sort: bool) -> float:
    """CPU seconds of writing ``rows`` into a new local store, ``batch`` at a time."""
    from oloproof_local import LocalStore

    folder = Path(tempfile.mkdtemp(prefix="oloproof-cache-rows-"))
    store = LocalStore(None, folder)
    try:
        store.cache_stats()  # the database opened and its tables made, outside the measurement
        start = time.process_time()
        for at in range(0, len(rows), batch):
            part = rows[at:at + batch]
            store.cache_put_many("execution", sorted(part, key=lambda kv: kv[0]) if sort else part)
        return time.process_time() - start
    finally:
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows written per measurement (100000)")
    parser.add_argument("--batch", type=int, default=500, help="rows a transaction (500)")
    parser.add_argument("--repeat", type=int, default=3, help="measurements of each order; medians (3)")
    args = parser.parse_args(argv)
    print(f"# cache_rows: {args.rows:,} rows, {args.batch} a transaction, medians of {args.repeat}; "
          f"load average at the start {load_average()}")
    times: dict[str, list[float]] = {"arrival": [], "sorted": []}
    for round_ in range(args.repeat):
        for order in times:
            times[order].append(write(items(f"{round_}-{order}", args.rows), args.batch, order == "sorted"))
    for order, values in times.items():
        print(f"{order:8} CPU {statistics.median(values):.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    ratio = statistics.median(times["sorted"]) / statistics.median(times["arrival"])
    print(f"sorted ÷ arrival: {ratio:.2f}×; load average at the end {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

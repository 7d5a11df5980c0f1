"""A run streamed through a store and back: peak memory must not grow with the run's length.

    python benchmarks/store_stream.py                          # local and postgres, 20,000 vs 200,000 cases
    python benchmarks/store_stream.py --stores local --large 1000000
    python benchmarks/store_stream.py --dsn postgresql://me@host/db   # an existing server

Each measurement is a fresh process that writes N synthetic case records (shaped like a run's:
case, output, judgments) through ``begin_run`` / ``add`` in chunks of ``--chunk`` / ``finish``,
then reads them all back through ``run_cases`` (which checks them against the run's seal first),
and reports its peak RSS (``resource.getrusage``) after the imports and the store's opening, after
writing, and after reading. Without ``--dsn`` a PostgreSQL server is started for the benchmark
(the tests' own, tests/pg_server.py) and stopped at the end. Informative only: the script exits 0
whatever the figures are; the ratio of the large run's peak to the small one's is what to watch
(1.00 is flat).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def record(i: int) -> dict:
    return {"id": f"case-{i:07d}", "case": {"input": {"question": f"What is the answer to question {i}?"},
                                            "expected": {"answer": f"answer {i}"}, "metadata": {"topic": f"t{i % 7}"}},
            "output": {"answer": f"answer {i}", "contexts": [f"passage {i} {k}" for k in range(3)]},
            "judgments": {"answer_correct": {"value": i % 3 != 0, "reason": "compared"}}, "latency_ms": i % 97}


def child(store_type: str, cases: int, chunk: int, where: str) -> None:
    """One measurement, in its own process: write, read back, print the figures as JSON."""
    if store_type == "local":
        from oloproof_local import LocalStore, Options

        store = LocalStore(Options(), Path(where))
    else:
        from oloproof_postgres import Options, PostgresStore

        dsn, schema = where.split(" ", 1)
        store = PostgresStore(Options(dsn=dsn, schema=schema), None)
    store.list_runs()  # opened
    opened = peak_mib()
    run_id = f"run_bench{secrets.token_hex(8)}"
    start = time.perf_counter()
    writer = store.begin_run(run_id)
    for first in range(0, cases, chunk):
        writer.add([record(i) for i in range(first, min(first + chunk, cases))])
    writer.finish({"id": run_id, "cases": cases}, {"state": "UNGATED/COMPLETE"})
    written, wrote_s = peak_mib(), time.perf_counter() - start
    start = time.perf_counter()
    count = sum(1 for r in store.run_cases(run_id) if r["judgments"]["answer_correct"]["value"] is not None)
    read_s = time.perf_counter() - start
    assert count == cases, (count, cases)
    store.close()
    print(json.dumps({"opened": opened, "written": written, "read": peak_mib(), "write_s": wrote_s, "read_s": read_s}))


def measure(store_type: str, cases: int, chunk: int, where: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", store_type, str(cases), str(chunk), where],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{store_type} {cases}: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="local,postgres")
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=2_000)
    parser.add_argument("--dsn", help="an existing PostgreSQL database (a fresh schema is made in it)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        store_type, cases, chunk, where = args.child
        child(store_type, int(cases), int(chunk), where)
        return
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    server = None
    stores = args.stores.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        places = {"local": tmp}
        if "postgres" in stores:
            dsn = args.dsn
            if dsn is None:
                sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
                from pg_server import Server  # the tests' own server

                server = Server().start()
                dsn = server.url()
            from oloproof_postgres import Options, PostgresStore

            schema = f"bench_{secrets.token_hex(4)}"
            PostgresStore(Options(dsn=dsn, schema=schema), None).init()
            places["postgres"] = f"{dsn} {schema}"
        try:
            print(f"{'store':<9} {'cases':>9} {'opened MiB':>11} {'written MiB':>12} {'read MiB':>9} "
                  f"{'write s':>8} {'read s':>7}")
            for store_type in stores:
                peaks = {}
                for cases in (args.small, args.large):
                    got = measure(store_type, cases, args.chunk, places[store_type])
                    peaks[cases] = got["read"]
                    print(f"{store_type:<9} {cases:>9,} {got['opened']:>11.1f} {got['written']:>12.1f} "
                          f"{got['read']:>9.1f} {got['write_s']:>8.2f} {got['read_s']:>7.2f}")
                print(f"{store_type:<9} peak RSS {args.large:,} / {args.small:,} cases: "
                      f"{peaks[args.large] / peaks[args.small]:.2f}x")
        finally:
            if server is not None:
                server.stop()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

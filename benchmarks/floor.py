"""The recording floor: the least a framework that records each case must do, as a whole process.

    python benchmarks/floor.py noop --cases cases.jsonl              # a no-op system, recorded
    python benchmarks/floor.py noop --cases cases.jsonl --bare       # the same loop, nothing recorded
    python benchmarks/floor.py http --cases cases.jsonl --url URL --concurrency 64

It is the reference the speed targets divide by (benchmarks/targets.py), beside the bare loop: a
run of Oloproof does all of this and more (located errors, checksums, seals, tallies, intervals,
the gate, the report), so the floor says how close the framework's own per-case work comes to the
least that recording needs. Each case, read from the project's case
file (one ``json.loads`` of its line, nothing checked):

- the input serialised once (canonical JSON: sorted keys, no whitespace), which is both the
  request body (``http``) and the execution cache key (sha256 of the system's identity and it);
- the system called: a function returning a constant ``{"answer": "ok"}`` (``noop``), or a POST of
  that body through one aiohttp session of ``concurrency`` keep-alive connections, the response
  parsed (``json.loads``) and its ``answer`` taken as the output (``http``);
- the output serialised once, its text reused in the record and the cache row;
- the ``contains`` judgment (the expected answer in the output, case-insensitive);
- one record row (run id, index, case id, the record's JSON built from the texts above) and one
  execution-cache row (the 32-byte key and the output's text) into SQLite in WAL mode
  (``synchronous=NORMAL``), 500 cases a transaction, in a new database file, written by a thread
  of its own.

``--bare`` leaves out everything after calling the system: the loop that reads and calls (the
no-op's bare loop; the HTTP bare loop is benchmarks/http_bench.py's ``loop``). Prints one line of
JSON: the cases, the seconds and CPU seconds inside the loop, and the count of passed judgments.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import queue
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

ANSWER = {"answer": "ok"}
IDENTITY = hashlib.sha256(b'{"name":"floor","version":"1"}').hexdigest().encode()  # the system's, digested once
ROWS = 500  # cases a transaction
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_TEXT = json.JSONEncoder(ensure_ascii=False).encode


def noop(input: dict) -> dict:
    return ANSWER


class Recorder:
    """The store: a record table and an execution cache, 500 cases a transaction, written by a
    thread of its own (SQLite releases the GIL while it writes), so the loop never waits on it."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE records (run_id TEXT, idx INTEGER, case_id TEXT, record TEXT, "
                        "PRIMARY KEY (run_id, idx))")
        self.db.execute("CREATE TABLE cache (key BLOB PRIMARY KEY, value TEXT)")
        self.run_id = f"floor-{os.getpid()}-{time.time_ns()}"
        self.records: list[tuple] = []
        self.cache: list[tuple] = []
        self.passed = 0
        self.batches: queue.Queue = queue.Queue(maxsize=4)  # bounded: the loop waits rather than holding every row
        self.thread = threading.Thread(target=self.write)
        self.thread.start()

    def add(self, idx: int, case: dict, body: bytes, key: bytes, output: object) -> None:
        text = _TEXT(output)  # the output's JSON, once: the record's and the cache's
        expected = case["expected"]["answer"]
        got = output.get("answer") if isinstance(output, dict) else output
        verdict = "pass" if expected.casefold() in str(got).casefold() else "fail"
        self.passed += verdict == "pass"
        case_id = case["id"]
        record = f'{{"id":{_TEXT(case_id)},"input":{body.decode()},"output":{text},"verdict":"{verdict}"}}'
        self.records.append((self.run_id, idx, case_id, record))
        self.cache.append((key, text))
        if len(self.records) == ROWS:
            self.flush()

    def flush(self) -> None:
        if self.records:
            self.batches.put((self.records, self.cache))
            self.records, self.cache = [], []

    def write(self) -> None:
        while (batch := self.batches.get()) is not None:
            records, cache = batch
            self.db.execute("BEGIN")
            self.db.executemany("INSERT INTO records VALUES (?, ?, ?, ?)", records)
            self.db.executemany("INSERT OR REPLACE INTO cache VALUES (?, ?)", cache)
            self.db.execute("COMMIT")

    def close(self) -> None:
        self.flush()
        self.batches.put(None)
        self.thread.join()
        self.db.close()


def cases(path: Path):
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def keyed(case: dict) -> tuple[bytes, bytes]:
    """The input serialised once: the body, and the cache key made from it."""
    body = _CANONICAL(case["input"]).encode()
    return body, hashlib.sha256(IDENTITY + b":" + body).digest()


def run_noop(path: Path, recorder: Recorder | None) -> int:
    n = 0
    for idx, case in enumerate(cases(path)):
        if recorder is None:
            noop(case["input"])
        else:
            body, key = keyed(case)
            recorder.add(idx, case, body, key, noop(case["input"]))
        n += 1
    return n


async def run_http(path: Path, recorder: Recorder | None, url: str, concurrency: int) -> int:
    import aiohttp

    todo = enumerate(cases(path))
    done = 0
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            nonlocal done
            for idx, case in todo:
                body, key = keyed(case)
                async with session.post(url, data=body, headers=headers) as response:
                    output = json.loads(await response.read())["answer"]
                if recorder is not None:
                    recorder.add(idx, case, body, key, output)
                done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system", choices=("noop", "http"))
    parser.add_argument("--cases", required=True, type=Path, help="the project's case file (JSONL)")
    parser.add_argument("--url", help="the service (http)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (http; 64)")
    parser.add_argument("--bare", action="store_true", help="call the system and record nothing")
    parser.add_argument("--db", type=Path, help="the database file (a new temporary one by default)")
    args = parser.parse_args(argv)
    if args.system == "http" and not args.url:
        parser.error("http needs --url")
    with tempfile.TemporaryDirectory(prefix="oloproof-floor-") as tmp:
        path = args.db or Path(tmp) / "floor.db"
        if path.exists():
            parser.error(f"{path} exists: the floor records into a new database")
        wall, cpu = time.perf_counter(), time.process_time()
        recorder = None if args.bare else Recorder(path)
        if args.system == "noop":
            n = run_noop(args.cases, recorder)
        else:
            n = asyncio.run(run_http(args.cases, recorder, args.url, args.concurrency))
        if recorder is not None:
            recorder.close()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"cases": n, "seconds": wall, "cpu_s": cpu,
                      "passed": None if recorder is None else recorder.passed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

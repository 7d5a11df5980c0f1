"""The recording floor of the speed targets (benchmarks/floor.py) records what it says it does."""

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

FLOOR = Path(__file__).resolve().parents[1] / "benchmarks" / "floor.py"


def test_the_floor_records_one_row_and_one_cache_row_a_case(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}", "input": {"question": f"q {i}", "a": i},
                                         "expected": {"answer": "OK" if i != 2 else "no"}}) + "\n"
                             for i in range(3)) + "\n", encoding="utf-8")
    db = tmp_path / "floor.db"
    out = subprocess.run([sys.executable, str(FLOOR), "noop", "--cases", str(cases), "--db", str(db)],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["cases"] == 3 and json.loads(out.stdout)["passed"] == 2
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        records = conn.execute("SELECT idx, case_id, record FROM records ORDER BY idx").fetchall()
        cache = dict(conn.execute("SELECT key, value FROM cache").fetchall())
    assert [(i, c) for i, c, _ in records] == [(0, "c0"), (1, "c1"), (2, "c2")]
    first = json.loads(records[0][2])
    assert first == {"id": "c0", "input": {"a": 0, "question": "q 0"}, "output": {"answer": "ok"}, "verdict": "pass"}
    assert json.loads(records[2][2])["verdict"] == "fail"
    identity = hashlib.sha256(b'{"name":"floor","version":"1"}').hexdigest().encode()
    key = hashlib.sha256(identity + b":" + b'{"a":0,"question":"q 0"}').digest()
    assert json.loads(cache[key]) == {"answer": "ok"} and len(cache) == 3
    bare = subprocess.run([sys.executable, str(FLOOR), "noop", "--cases", str(cases), "--bare",
                           "--db", str(tmp_path / "bare.db")], capture_output=True, text=True, check=True)
    assert json.loads(bare.stdout)["passed"] is None and not (tmp_path / "bare.db").exists()

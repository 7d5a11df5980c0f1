"""Fault injection: the real command killed with SIGKILL at seeded random points of run, judging,
compare and diagnose. After every kill the store verifies (`oloproof store check`), no case that
finished and no judgment that was paid for before the kill (less the writer's bound) is lost, and
the next run completes."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from provider_standin import Fault, StandIn

KEY = "sk-standin-faults"
GRACE = 0.5  # seconds: docs/runs.md promises a commit within 0.1 s plus the commit's own time
SEED = 20261201
KILLS = ("run", "judge", "diagnose", "compare", "run", "judge", "diagnose")

APP = '''
import os, time
from oloproof import Passage, Retrieval, rag_system

@rag_system(name="staged", version="1", depth=2, top_k=1, token_budget=100, index_version="1")
class Staged:
    def retrieve(self, input, depth):
        text = "blue" if input["n"] % 2 == 0 else "grey"
        return Retrieval(query=input["q"], depth=depth, candidates=(Passage(doc_id="d", score=1.0, text=text),))

    def generate(self, input, context):
        time.sleep(1.5 if input["n"] % 10 == 9 else 0.03)  # a stall: nothing else finishes for a while
        answer = " ".join(item.text or "" for item in context.items)
        with open(os.environ["OLO_LOG"], "a") as log:  # the moment this case's execution finished
            log.write(f"{input['q']} {time.time()}\\n")
        return {"answer": answer}

    def count_tokens(self, passage):
        return 1
'''


def config(url: str, version: int, rubric: int) -> str:
    return f"""
system:
  name: staged
  version: "{version}"
  rag: app:Staged
cases: cases.jsonl
concurrency: 4
evaluators:
  - {{type: contains, criterion: answer_correct, field: answer, expected_field: answer}}
  - type: rubric_judge
    criterion: helpful
    rubric: "The answer is helpful ({rubric})."
    provider: openai
    model: judge-1
    provider_options: {{base_url: "{url}", api_key_env: OLO_JUDGE_KEY, backoff: 0.0}}
"""


def rows(db: Path, ns: str) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as con:
        return con.execute("SELECT count(*) FROM cache WHERE ns = ?", (ns,)).fetchone()[0]


def judged(db: Path) -> int:
    """The judgments the judgment cache holds: a row is a case execution's judgments by evaluator
    identity (docs/caching.md), so a new rubric adds judgments to the rows already there."""
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as con:
        values = [json.loads(v) for (v,) in con.execute("SELECT value FROM cache WHERE ns = 'judgment'")]
    return sum(len(v) if isinstance(v, dict) else 1 for v in values)


def logged(path: Path, before: float) -> int:
    if not path.exists():
        return 0
    return len({line.split()[0] for line in path.read_text().splitlines()
                if len(line.split()) == 2 and float(line.split()[1]) < before})


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing_finished(tmp_path):
    rng = random.Random(SEED)
    root = tmp_path
    (root / "app.py").write_text(APP)
    (root / "cases.jsonl").write_text("".join(
        f'{{"id": "c{n:02d}", "input": {{"q": "q{n}", "n": {n}}}, "expected": {{"answer": "blue", '
        f'"gold_context": [{{"doc_id": "g", "text": "blue"}}]}}}}\n' for n in range(40)))
    db = root / ".oloproof" / "store.db"
    env = {**os.environ, "OLO_JUDGE_KEY": KEY, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}

    def olo(*args: str, log: str = "done.log") -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "oloproof", *args], cwd=root, capture_output=True, text=True,
                              env={**env, "OLO_LOG": str(root / log)}, timeout=120)

    with StandIn(key=KEY) as standin:
        (root / "oloproof.yaml").write_text(config(standin.openai_url, 0, 0))
        first = olo("run")
        assert first.returncode == 0, first
        baseline = re.search(r"run_\w{26}", first.stdout).group()
        for k, phase in enumerate(KILLS, 1):
            # a new system version misses the execution cache, a new rubric the judgment cache
            version = k if phase == "run" else 0
            (root / "oloproof.yaml").write_text(config(standin.openai_url, version, k))
            log = root / f"kill{k}.log"
            executions, judgments = rows(db, "execution"), judged(db)
            replied = len(standin.replied)
            args = {"run": ("run",), "judge": ("run",),
                    "diagnose": ("diagnose", baseline, "--intervention", "gold-context", "--criterion",
                                 "answer_correct"),
                    "compare": ("compare", "latest", baseline, "--policy", "compare.yaml")}[phase]
            if phase == "diagnose":  # the suite as the baseline ran it, so diagnose accepts the run
                (root / "oloproof.yaml").write_text(config(standin.openai_url, 0, 0))
            (root / "compare.yaml").write_text("version: 1\nrules: []\n")
            if phase == "judge":  # judge calls that take a while, so the kill lands among them
                standin.faults.extend([Fault("slow", 0.2)] * 40)
            proc = subprocess.Popen([sys.executable, "-m", "oloproof", *args], cwd=root, env={**env, "OLO_LOG": str(log)},
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # wait until the phase is under way, then kill at a random moment of it
            deadline = time.monotonic() + 60
            target = rng.randint(2, 10 if phase == "judge" else 30)
            while proc.poll() is None and time.monotonic() < deadline:
                if phase in ("run", "diagnose") and log.exists() and len(log.read_text().splitlines()) >= target:
                    break
                if phase == "judge" and len(standin.replied) - replied >= target:
                    break
                if phase == "compare":
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(*{"run": (0.6, 1.2), "judge": (0.6, 1.0), "diagnose": (0.0, 0.4),
                                     "compare": (0.0, 1.5)}[phase]))
            killed_at = time.time()
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)

            check = olo("store", "check")
            assert check.returncode == 0, (phase, check.stdout, check.stderr)
            if phase == "run":
                assert rows(db, "execution") - executions >= logged(log, killed_at - GRACE), phase
            if phase == "judge":
                paid = sum(1 for t in standin.replied[replied:] if t < killed_at - GRACE)
                assert judged(db) - judgments >= paid, (phase, paid)
            standin.faults.clear()
            (root / "oloproof.yaml").write_text(config(standin.openai_url, version, k))
            after = olo("run")
            assert after.returncode == 0 and "COMPLETE]" in after.stdout, (phase, after.stdout, after.stderr)
            if phase == "run":  # every case that finished before the kill was reused
                hits = int(re.search(r"Cache: execution (\d+) hit", after.stdout).group(1))
                assert hits >= logged(log, killed_at - GRACE)

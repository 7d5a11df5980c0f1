"""Durability through the real command: judgments committed as they arrive, Ctrl-C during judging
keeps what was judged and prints the report, a second Ctrl-C exits at once, a diagnosis that dies
leaves no child run behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import case
from provider_standin import Fault, StandIn

KEY = "sk-standin-durable"


def judged(project, standin: StandIn, n: int, concurrency: int = 2) -> None:
    project.cases([case(i) for i in range(n)])
    project.write("oloproof.yaml", f"""
        system:
          name: echo
          version: "1"
          callable: app:run
        cases: cases.jsonl
        concurrency: {concurrency}
        evaluators:
          - type: rubric_judge
            criterion: helpful
            rubric: "The answer is helpful."
            provider: openai
            model: judge-1
            provider_options: {{base_url: "{standin.openai_url}", api_key_env: OLO_JUDGE_KEY, backoff: 0.0}}
    """)


def start(project, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "NO_COLOR": "1", "OLO_JUDGE_KEY": KEY}
    return subprocess.Popen([sys.executable, "-m", "oloproof", *args], cwd=project.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def count(db: Path, sql: str) -> int:
    if not db.exists():
        return 0
    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db, timeout=1)) as con:
        return con.execute(sql).fetchone()[0]
    return 0


def wait_for(predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


JUDGMENTS = "SELECT count(*) FROM cache WHERE ns = 'judgment'"


@pytest.mark.slow
def test_judgments_are_committed_as_they_arrive_and_ctrl_c_keeps_them(project):
    with StandIn(key=KEY) as standin:
        judged(project, standin, 24)
        # ten quick replies, then calls that would hang for a minute
        standin.faults.extend([Fault("slow", 0.05)] * 10 + [Fault("slow", 60)] * 20)
        proc = start(project, "run")
        db = project.root / ".oloproof" / "store.db"
        wait_for(lambda: len(standin.requests) >= 12 and count(db, JUDGMENTS) >= 10)
        time.sleep(0.3)  # let the hanging calls be in flight
        # the judgments already paid for are in the store while the run is still going
        assert proc.poll() is None and count(db, JUDGMENTS) == 10
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - sent < 10  # the calls in flight are not waited for
        assert proc.returncode == 130, (out, err)
        assert "Traceback" not in err
        assert re.match(r"Run run_\w{26} \[UNDECIDED/INTERRUPTED\]", out), out
        assert "Gate: UNDECIDED (the run was interrupted; exit 130)" in out
        assert "10 / 10 observed · 14 missing" in out
        assert len(project.runs()) == 1
        standin.faults.clear()
        again = project.run("run", env={"OLO_JUDGE_KEY": KEY})
        assert again.code == 0, again
        assert "Cache: execution 24 hit/0 miss; judgment 10 hit/14 miss" in again.out


STALLING_APP = '''
import time
from oloproof import system

@system(name="echo", version="1")
def run(input):
    if input["q"] not in ("answer 0", "answer 1"):
        time.sleep(60)
    return {"answer": input["q"]}
'''


def test_a_second_ctrl_c_exits_at_once_without_a_traceback(project):
    with StandIn(key=KEY) as standin:
        judged(project, standin, 6)
        project.write("app.py", STALLING_APP)
        standin.faults.extend([Fault("slow", 60)] * 10)
        proc = start(project, "run")
        db = project.root / ".oloproof" / "store.db"
        wait_for(lambda: count(db, "SELECT count(*) FROM cache WHERE ns = 'execution'") >= 2)
        proc.send_signal(signal.SIGINT)  # stops the execution; the two finished cases are judged
        wait_for(lambda: len(standin.requests) >= 1)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)  # while a judge call hangs
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - sent < 5
        assert proc.returncode == 130, (out, err)
        assert err.strip() == "Interrupted again: exiting now.", err
        assert count(db, "SELECT count(*) FROM cache WHERE ns = 'execution'") == 2


STAGED_APP = '''
import os, time
from pathlib import Path
from oloproof import Passage, Retrieval, rag_system

@rag_system(name="staged", version="1", depth=2, top_k=1, token_budget=100, index_version="1")
class Staged:
    def retrieve(self, input, depth):
        return Retrieval(query=input["q"], depth=depth, candidates=(Passage(doc_id="x", score=1.0, text="grey"),))

    def generate(self, input, context):
        answer = " ".join(item.text or "" for item in context.items)
        if os.environ.get("OLO_STALL") and answer == "grey":  # the control re-execution hangs
            Path("stalled").touch()
            time.sleep(60)
        return {"answer": answer}

    def count_tokens(self, passage):
        return 1
'''


@pytest.mark.slow
def test_a_diagnosis_killed_part_way_leaves_no_child_run(project):
    project.write("app.py", STAGED_APP)
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text().replace("callable: app:run",
                                                                                        "rag: app:Staged"))
    project.cases([{"id": f"c{i}", "input": {"q": str(i)},
                    "expected": {"answer": "blue", "gold_context": [{"doc_id": "g", "text": "blue"}]}}
                   for i in range(3)])
    first = project.run("run")
    assert first.code == 0, first
    runs = project.runs()
    proc = subprocess.Popen([sys.executable, "-m", "oloproof", "diagnose", runs[0], "--intervention",
                             "gold-context", "--criterion", "answer_correct"], cwd=project.root,
                            env={**os.environ, "OLO_STALL": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # the gold-context child run is done once the control starts re-executing
    wait_for(lambda: (project.root / "stalled").exists() or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()
    proc.kill()
    proc.communicate(timeout=30)
    assert project.runs() == runs  # neither child run, nor a diagnosis naming them
    check = project.run("store", "check")
    assert check.code == 0 and "0 objects" in check.out, check
    (project.root / "stalled").unlink()
    done = project.run("diagnose", runs[0], "--intervention", "gold-context", "--criterion", "answer_correct")
    assert done.code == 0, done
    assert len(project.runs()) == 3


@pytest.mark.slow
def test_a_run_killed_after_some_batches_is_unfinished_and_the_next_run_removes_it(project):
    """A streaming run writes its batches as they finish; killed (SIGKILL) after the first, it is
    in no listing, `store check` calls it unfinished (not damage), and the next run clears it."""
    project.write("app.py", """
        import time
        from oloproof import system

        @system(name="echo", version="1")
        def run(input):
            time.sleep(input["pause"])
            return {"answer": input["q"]}
    """)
    # two batches of 2,000 and 600, the second slow enough to be running when the run is killed
    project.cases([case(i, pause=0.002 if i < 2_000 else 0.02) for i in range(2_600)])
    proc = start(project, "run")
    db = project.root / ".oloproof" / "store.db"
    deadline = time.monotonic() + 90
    stored = 0
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(sqlite3.Error):
            with contextlib.closing(sqlite3.connect(db)) as con:
                stored = con.execute("SELECT COUNT(*) FROM run_cases").fetchone()[0]
        if stored:
            break
        time.sleep(0.05)
    assert stored == 2_000 and proc.poll() is None, "the first batch is stored while the run goes on"
    time.sleep(0.3)  # an execution is committed within 0.1 s of finishing (docs/runs.md): the first batch's are
    assert proc.poll() is None, "the second batch is still running"
    proc.kill()
    proc.communicate(timeout=30)
    assert project.runs() == []
    listed = project.run("runs")
    assert "run_" not in listed.out
    check = project.run("store", "check")
    assert check.code == 0, check
    assert "Unfinished: 1 run begun and not finished (2000 case records, seen by no command)" in check.out, check
    assert "No damage found" in check.out
    again = project.run("run")
    assert again.code == 0, again
    hits = int(re.search(r"Cache: execution (\d+) hit/(\d+) miss", again.out).group(1))
    assert hits >= 2_000, "the killed run's finished cases are reused"
    check = project.run("store", "check")
    assert "Unfinished" not in check.out and "1 run (2600 case records)" in check.out, check

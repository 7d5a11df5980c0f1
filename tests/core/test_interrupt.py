"""Ctrl-C mid-run: finished cases are kept, the run says it is incomplete, the next run resumes."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import case


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_interrupt_keeps_finished_cases_and_the_next_run_resumes(project):
    project.write("app.py", """
        import time
        from oloproof import system

        @system(name="slow", version="1")
        def run(input):
            time.sleep(0.02)
            return {"answer": input["q"]}
    """)
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "concurrency: 2\n")
    project.cases([case(i) for i in range(400)])  # about 4 s at 2 in flight
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    # the child starts with SIGINT at its default, as a user's shell starts it, whatever this test
    # process inherited (a background job of a non-interactive shell ignores SIGINT, and an ignored
    # signal stays ignored across exec)
    proc = subprocess.Popen([sys.executable, "-m", "oloproof", "run"], cwd=project.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    # interrupt once some cases are finished and cached (polling, not a fixed sleep: a loaded
    # machine may take a while to start the command)
    db = project.root / ".oloproof" / "store.db"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if db.exists():
            with contextlib.suppress(sqlite3.Error), sqlite3.connect(db, timeout=1) as con:
                if con.execute("SELECT count(*) FROM cache WHERE ns = 'execution'").fetchone()[0] >= 10:
                    break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert re.match(r"Run run_\w{26} \[UNDECIDED/INTERRUPTED\]", out), out
    assert "Gate: UNDECIDED (the run was interrupted; exit 130)" in out
    match = re.search(r"(\d+) / (\d+) observed · (\d+) missing", out)
    finished, missing = int(match.group(1)), int(match.group(3))
    assert finished > 0 and missing > 0 and finished + missing == 400
    assert len(project.runs()) == 1  # the incomplete run is stored

    resumed = project.run("run")
    assert resumed.code == 0, resumed
    hits, misses = map(int, re.search(r"Cache: execution (\d+) hit/(\d+) miss", resumed.out).groups())
    assert hits >= finished and hits + misses == 400  # every finished case is reused
    assert "400 / 400 observed · 0 missing" in resumed.out


@pytest.mark.slow
def test_ctrl_c_between_the_waves_of_conversations_keeps_the_turns_before_it(project):
    # a conversation's turns run in waves (every turn 1, then every turn 2 with its history, ...);
    # Ctrl-C during the second wave keeps every first turn, and the next run resumes from them
    project.write("app.py", """
        import os, signal
        from oloproof import system

        @system(name="chat", version="1")
        def run(input, history):
            if input["q"] == "c03 turn 2" and os.environ.get("OLO_TEST_INTERRUPT"):
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, once the first wave is done
            return {"answer": input["q"], "heard": len(history)}
    """)
    project.cases([{"id": f"c{c:02d}", "turns": [{"input": {"q": f"c{c:02d} turn {t}"},
                                                  "expected": {"answer": f"turn {t}"}} for t in (1, 2, 3)]}
                   for c in range(8)])
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "NO_COLOR": "1", "OLO_TEST_INTERRUPT": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "oloproof", "run"], cwd=project.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert re.match(r"Run run_\w{26} \[UNDECIDED/INTERRUPTED\]", out), out
    # the 8 first turns and the second turns before c03's were judged; the rest did not finish
    assert "Missing: 13 of 24 cases produced no output: interrupted (13)" in out, out
    assert "judgment 0 hit/11 miss" in out, out
    assert len(project.runs()) == 1
    resumed = project.run("run")
    assert resumed.code == 0, resumed
    # every finished turn reused; contains (not cached) judges all 24 again
    assert "Cache: execution 11 hit/13 miss; judgment 0 hit/24 miss" in resumed.out, resumed
    assert "mean of 24 cases in 8 clusters · 0 clusters missing" in resumed.out, resumed

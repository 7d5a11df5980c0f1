"""The ray executor against a real Ray head (separate worker processes, not local mode): the same
records as the local executor, a worker killed mid-run survived, Ctrl-C leaves a resumable run."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Project, case, olo

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def ray_head():
    try:
        import ray  # noqa: F401 - the ray extra
        from ray_head import RayHead

        head = RayHead().start()
    except Exception as exc:  # noqa: BLE001 - any reason the head cannot start is reported
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"a Ray head could not be started: {exc}")
        pytest.skip(f"a Ray head could not be started: {exc}")
    yield head
    head.stop()


def records(root: Path, run_id: str) -> tuple[dict, list[dict]]:
    """A run's summary and case records, without what differs between any two runs (ids, times)."""
    with sqlite3.connect(root / ".oloproof" / "store.db") as con:
        summary = json.loads(con.execute("SELECT summary FROM runs WHERE id = ?", (run_id,)).fetchone()[0])
    out = olo("export", run_id, cwd=root)
    rows = [json.loads(line) for line in out.out.splitlines()[1:]]
    for row in rows:
        row.pop("seconds", None)
    summary.pop("caches", None)
    return summary, rows


def test_the_rag_example_records_the_same_under_ray_as_locally(tmp_path, ray_head):
    local, remote = tmp_path / "local", tmp_path / "remote"
    for root in (local, remote):
        shutil.copytree(EXAMPLES / "support_rag", root)
    here = olo("run", cwd=local)
    there = olo("run", "--executor", "ray", cwd=remote, env=ray_head.env(), timeout=600)
    assert here.code == there.code == 3, there
    # the printed report is the same, but for the run id
    strip = re.compile(r"run_\w{26}")
    assert strip.sub("RUN", here.out) == strip.sub("RUN", there.out)
    assert "Stages: retrieve 0 hit/13 miss; generate 0 hit/13 miss" in there.out
    [local_id], [remote_id] = Project(local).runs(), Project(remote).runs()
    assert records(local, local_id) == records(remote, remote_id)

    # diagnose re-executes where the run executed (the run records its executor) and labels alike
    with sqlite3.connect(remote / ".oloproof" / "store.db") as con:
        header = json.loads(con.execute("SELECT header FROM runs WHERE id = ?", (remote_id,)).fetchone()[0])
    assert header["executor"] == "ray"
    for intervention in (["gold-context"], ["top-k", "--top-k", "6"]):
        args = ["diagnose", "latest", "--criterion", "answer_correct", "--intervention", *intervention]
        here_diagnosis = olo(*args, cwd=local)
        there_diagnosis = olo(*args, cwd=remote, env=ray_head.env(), timeout=600)
        assert here_diagnosis.code == there_diagnosis.code == 0, there_diagnosis
        ids = re.compile(r"(run_\w{26}|sha256:[0-9a-f]+)")
        assert ids.sub("ID", here_diagnosis.out) == ids.sub("ID", there_diagnosis.out)

    # the system's stage caches are read on the workers: a new execution of unchanged stages hits them
    assert olo("cache", "clear", "execution", cwd=remote).code == 0
    again = olo("run", "--executor", "ray", cwd=remote, env=ray_head.env(), timeout=600)
    assert "Cache: execution 0 hit/13 miss; judgment 65 hit/0 miss" in again.out, again
    assert "Stages: retrieve 13 hit/0 miss; generate 13 hit/0 miss" in again.out


SLOW_APP = '''
import os, time
from pathlib import Path
from oloproof import system

@system(name="slow", version="1")
def run(input):
    marks = Path(MARKS)
    (marks / f"{os.getpid()}-{input['q'].replace(' ', '_')}").touch()
    time.sleep(PAUSE)
    return {"answer": input["q"]}
'''


def slow_project(root: Path, n: int, executor: str, marks: Path, pause: float = 0.2) -> Project:
    project = Project(root)
    # the workers do not share this process's environment: the app carries its settings
    project.write("app.py", f"MARKS, PAUSE = {str(marks)!r}, {pause}\n" + SLOW_APP)
    project.write("oloproof.yaml", f"""
        system: {{name: slow, version: "1", callable: app:run}}
        cases: cases.jsonl
        concurrency: 1
        executor: {executor}
        evaluators:
          - {{type: contains, criterion: answer_correct, field: answer, expected_field: answer}}
    """)
    project.cases([case(i) for i in range(n)])
    return project


def wait_for(predicate, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_worker_killed_mid_run_is_survived(tmp_path, ray_head):
    marks = tmp_path / "marks"
    marks.mkdir()
    project = slow_project(tmp_path / "p", 24, "{type: ray, replicas: 1, batch_size: 4, max_retries: 3}", marks)
    env = {**ray_head.env(), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "oloproof", "run"], cwd=project.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(list(marks.iterdir())) >= 2)
    victim = int(next(marks.iterdir()).name.split("-")[0])
    os.kill(victim, signal.SIGKILL)  # the replica's worker process dies with its batch in flight
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, (out, err)
    assert "24 / 24 observed · 0 missing" in out, out
    pids = {int(m.name.split("-")[0]) for m in marks.iterdir()}
    assert len(pids) >= 2  # the batch ran again on a restarted replica


def test_ctrl_c_leaves_a_resumable_run(tmp_path, ray_head):
    marks = tmp_path / "marks"
    marks.mkdir()
    project = slow_project(tmp_path / "p", 60, "{type: ray, replicas: 1, batch_size: 2}", marks, 0.15)
    env = {**ray_head.env(), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "oloproof", "run"], cwd=project.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    db = project.root / ".oloproof" / "store.db"

    def cached() -> int:
        if not db.exists():
            return 0
        with contextlib.suppress(sqlite3.Error), sqlite3.connect(db, timeout=1) as con:
            return con.execute("SELECT count(*) FROM cache WHERE ns = 'execution'").fetchone()[0]
        return 0

    wait_for(lambda: cached() >= 6)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert re.match(r"Run run_\w{26} \[UNDECIDED/INTERRUPTED\]", out), out
    finished, missing = map(int, re.search(r"(\d+) / \d+ observed · (\d+) missing", out).groups())
    assert finished > 0 and missing > 0 and finished + missing == 60, out

    resumed = olo("run", cwd=project.root, env=env, timeout=600)
    assert resumed.code == 0, resumed
    hits, misses = map(int, re.search(r"Cache: execution (\d+) hit/(\d+) miss", resumed.out).groups())
    assert hits >= finished and hits + misses == 60
    assert "60 / 60 observed · 0 missing" in resumed.out

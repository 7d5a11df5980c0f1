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
    assert "Cache: execution 0 hit/13 miss; judgment 0 hit/65 miss" in again.out, again
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


# -- a killed driver -------------------------------------------------------------------------------

def started(pid: int) -> int | None:
    """A process's start time, None when it is gone (or a zombie: it runs nothing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def tree(root: int) -> dict[int, tuple[int, str]]:
    """The descendants of ``root``: pid -> (start time, command line)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            when = started(pid)
            if pid not in found and when is not None:
                with contextlib.suppress(OSError):
                    found[pid] = (when, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
                todo.append(pid)
    return found


def left_after(processes: dict[int, tuple[int, str]], seconds: float) -> tuple[dict, float]:
    """Those of ``processes`` still running after ``seconds`` (sooner when none is), and the wait."""
    start = time.monotonic()
    while True:
        left = {pid: p for pid, p in processes.items() if started(pid) == p[0]}
        if not left or time.monotonic() - start > seconds:
            return left, time.monotonic() - start
        time.sleep(0.2)


def killed_mid_run(project: Project, marks: Path, env: dict) -> tuple[subprocess.Popen, set[int]]:
    proc = subprocess.Popen([sys.executable, "-m", "oloproof", "run"], cwd=project.root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: len({m.name.split("-")[0] for m in marks.iterdir()}) >= 2)
    return proc, {int(m.name.split("-")[0]) for m in marks.iterdir()}


def test_a_killed_driver_leaves_no_actor_on_the_cluster(tmp_path, ray_head):
    """On a cluster started elsewhere, the replicas are the job's actors, owned by the driver: when
    it is SIGKILLed, Ray ends them (and its idle workers of that job)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    project = slow_project(tmp_path / "p", 200, "{type: ray, replicas: 2, batch_size: 2}", marks, 0.3)
    proc, replicas = killed_mid_run(project, marks, {**ray_head.env(), "NO_COLOR": "1"})
    jobs = {pid: p for pid, p in tree(ray_head.proc.pid).items() if p[1].startswith(("ray::Replica", "ray::StageReader"))}
    assert set(jobs) >= replicas, (jobs, replicas)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left, waited = left_after(jobs, 20)
    assert not left, f"still running {waited:.0f} s after the driver was killed: {left}"
    assert not [p for p in tree(ray_head.proc.pid).values() if p[1].startswith(("ray::Replica", "ray::StageReader"))]


def test_a_killed_driver_takes_the_cluster_it_started_with_it(tmp_path):
    """With no cluster to join, ``oloproof run`` starts one; SIGKILLed mid-run, every process it
    started (the GCS, the raylet, its agents, the replicas) ends within seconds: Ray alone left the
    agents for a minute (plugins/oloproof_ray/watchdog.py)."""
    pytest.importorskip("ray")
    import tempfile

    marks = tmp_path / "marks"
    marks.mkdir()
    project = slow_project(tmp_path / "p", 200, "{type: ray, replicas: 2, batch_size: 2}", marks, 0.3)
    temp = tempfile.mkdtemp(prefix="oray")  # short: Ray's socket paths have a length limit
    # RAY_AUTH_MODE: a cluster that ray.init() starts would otherwise write ~/.ray/auth_token
    env = {**os.environ, "NO_COLOR": "1", "RAY_ADDRESS": "local", "RAY_TMPDIR": temp, "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "disabled"}
    proc, replicas = killed_mid_run(project, marks, env)
    processes = tree(proc.pid)
    try:
        commands = " ".join(p[1] for p in processes.values())
        assert "raylet" in commands and "gcs_server" in commands and "watchdog.py" in commands, commands
        assert replicas <= set(processes)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left, waited = left_after(processes, 20)
        assert not left, f"still running {waited:.0f} s after the driver was killed: {left}"
    finally:
        for pid, (when, _) in processes.items():  # this test's own leftovers, should it fail
            if started(pid) == when:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)

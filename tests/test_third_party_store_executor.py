"""A third-party store and a third-party executor, for real: `oloproof-jsonfolder-store` and
`oloproof-procpool-executor` (tests/third_party/, written against `oloproof` alone) installed
beside Oloproof in a fresh virtualenv, the way tests/test_third_party.py installs its packages.

The store passes the conformance kit in its own tests (tests/third_party/jsonfolder_store/tests,
run by the fast suite); here a real `oloproof run` keeps its runs, caches and objects in the folder
and `oloproof store check` verifies them. The executor runs the support_rag example's cases in
worker processes and prints and records what the local executor does; Ctrl-C stops the run with
exit 130 and leaves no worker process behind; a worker killed mid-run leaves its cases missing.
"""

from __future__ import annotations

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
from conftest import Project

from test_third_party import IGNORE, ROOT, Venv, clean_env, row

pytestmark = pytest.mark.slow

PACKAGES = ROOT / "tests" / "third_party"
EXAMPLES = ROOT / "examples"
RUN = re.compile(r"run_[0-9A-HJKMNP-TV-Z]{26}")
# every importing process leaves its pid: the run's own process, and each worker that builds the system
MARKER = ('import os as _os, pathlib as _pathlib\n'
          'if _os.environ.get("MARKS"):\n'
          '    (_pathlib.Path(_os.environ["MARKS"]) / str(_os.getpid())).touch()\n')


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("third_party_store_executor")
    shutil.copytree(ROOT, base / "oloproof-src", ignore=IGNORE)
    for name in ("jsonfolder_store", "procpool_executor"):
        shutil.copytree(PACKAGES / name, base / name, ignore=IGNORE)
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=300)
    env = Venv(base / "venv")
    env.pip("install", str(base / "oloproof-src"), str(base / "jsonfolder_store"), str(base / "procpool_executor"))
    return env


def example(name: str, where: Path, marks: Path | None = None) -> Path:
    """A copy of ``examples/<name>``; with ``marks``, its app leaves the pid of every process that imports it there."""
    shutil.copytree(EXAMPLES / name, where, ignore=IGNORE)
    if marks is not None:
        marks.mkdir(exist_ok=True)
        app = where / "app.py"
        app.write_text(MARKER + app.read_text(encoding="utf-8"), encoding="utf-8")
    return where


def pids(marks: Path) -> set[int]:
    return {int(p.name.split("-")[0]) for p in marks.iterdir()}


def test_plugins_lists_the_store_and_the_executor(venv: Venv, tmp_path: Path) -> None:
    proc = venv.oloproof("plugins", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row(proc.stdout, "jsonfolder") == ["jsonfolder", "store jsonfolder", "oloproof-jsonfolder-store 0.1.0"]
    assert row(proc.stdout, "procpool") == ["procpool", "executor procpool", "oloproof-procpool-executor 0.1.0"]


# -- the store ----------------------------------------------------------------------------


def test_runs_compare_and_store_check_on_the_jsonfolder_store(venv: Venv, tmp_path: Path) -> None:
    project = example("basic", tmp_path / "basic")
    config = project / "oloproof.yaml"
    Project(project).cache_judgments()  # its judgments kept too
    config.write_text(config.read_text(encoding="utf-8") + "store: {type: jsonfolder, path: .olo-json}\n",
                      encoding="utf-8")
    first = venv.oloproof("run", cwd=project)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Cache: execution 0 hit/12 miss; judgment 0 hit/24 miss" in first.stdout
    second = venv.oloproof("run", cwd=project)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Cache: execution 12 hit/0 miss; judgment 24 hit/0 miss" in second.stdout, "the caches are in the folder"
    a, b = RUN.match(first.stdout, 4).group(), RUN.match(second.stdout, 4).group()
    assert (project / ".olo-json" / "runs" / a / "run.json").is_file()
    assert not (project / ".oloproof").exists(), "nothing went to the local store"

    listing = venv.oloproof("runs", cwd=project)
    assert row(listing.stdout, a)[0] == a and row(listing.stdout, b)[0] == b
    (project / "compare.yaml").write_text("version: 1\nrules:\n  - {id: answers-not-worse, metric: answer_correct, "
                                          "kind: non-inferiority, margin: 5.0}\n", encoding="utf-8")
    compared = venv.oloproof("compare", b, a, "--policy", "compare.yaml", cwd=project)
    assert compared.returncode == 3 and "Changed verdicts: none" in compared.stdout, compared.stdout + compared.stderr
    inspected = venv.oloproof("inspect", "latest", cwd=project)
    assert inspected.returncode == 0 and inspected.stdout.startswith(f"Run {b} [DECIDED/COMPLETE]"), inspected.stderr

    check = venv.oloproof("store", "check", cwd=project)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines() == [
        "Store jsonfolder .olo-json: 2 runs (24 case records), 24 cached values, 1 object", "No damage found"]

    # the stored bytes changed behind the store's back: check names the run, reading it is refused
    for chunk in (project / ".olo-json" / "runs" / a).glob("cases-*.json"):
        chunk.write_text(chunk.read_text(encoding="utf-8").replace("Paris", "Berlin"), encoding="utf-8")
    damaged = venv.oloproof("store", "check", cwd=project)
    assert damaged.returncode == 2, damaged.stdout + damaged.stderr
    assert damaged.stdout.splitlines()[1:] == [
        f"Damaged: run {a}: its case records do not match its seal",
        "1 damaged; `oloproof store repair` removes the damaged cached values and quarantines the damaged runs"]
    refused = venv.oloproof("inspect", a, cwd=project)
    assert refused.returncode == 2 and f"run {a} is damaged" in refused.stderr, refused.stdout + refused.stderr
    assert venv.oloproof("inspect", b, cwd=project).returncode == 0, "the other run is intact"


# -- the executor -------------------------------------------------------------------------


def test_procpool_prints_and_records_what_the_local_executor_does(venv: Venv, tmp_path: Path) -> None:
    here_marks, there_marks = tmp_path / "here-marks", tmp_path / "there-marks"
    here = example("support_rag", tmp_path / "local", here_marks)
    there = example("support_rag", tmp_path / "procpool", there_marks)
    local = venv.oloproof("run", cwd=here, MARKS=str(here_marks))
    pool = venv.oloproof("run", "--executor", "procpool", cwd=there, MARKS=str(there_marks))
    assert local.returncode == pool.returncode == 3, pool.stdout + pool.stderr
    assert RUN.sub("RUN", local.stdout) == RUN.sub("RUN", pool.stdout), "the same report, but for the run id"
    assert "Stages: retrieve 0 hit/13 miss; generate 0 hit/13 miss" in pool.stdout  # counted in the workers
    assert len(pids(here_marks)) == 1 and len(pids(there_marks)) >= 2, "the cases ran in worker processes"

    # the same case records, output, artifacts and judgments
    local_id, pool_id = RUN.search(local.stdout).group(), RUN.search(pool.stdout).group()
    for project, run_id in ((here, local_id), (there, pool_id)):
        assert venv.oloproof("export", run_id, cwd=project).returncode == 0
    bundle = ".oloproof/bundles/{}/cases.jsonl"
    assert ((here / bundle.format(local_id)).read_text(encoding="utf-8")
            == (there / bundle.format(pool_id)).read_text(encoding="utf-8"))

    # diagnose re-executes through the executor the run recorded: the same diagnosis, from new workers
    before = pids(there_marks)
    args = ("diagnose", "latest", "--criterion", "answer_correct", "--intervention", "gold-context")
    local_diagnosis = venv.oloproof(*args, cwd=here, MARKS=str(here_marks))
    pool_diagnosis = venv.oloproof(*args, cwd=there, MARKS=str(there_marks))
    assert local_diagnosis.returncode == pool_diagnosis.returncode == 0, pool_diagnosis.stdout + pool_diagnosis.stderr
    ids = re.compile(r"(run_\w{26}|sha256:[0-9a-f]+)")
    assert ids.sub("ID", local_diagnosis.stdout) == ids.sub("ID", pool_diagnosis.stdout)
    # the command's own process, and workers for the intervention and for its control
    assert len(pids(there_marks) - before) >= 3, "the intervention and its control ran in worker processes"

    # the stage caches are read in the workers: re-executing unchanged stages hits them
    assert venv.oloproof("cache", "clear", "execution", cwd=there).returncode == 0
    again = venv.oloproof("run", "--executor", "procpool", cwd=there)
    assert "Cache: execution 0 hit/13 miss; judgment 0 hit/65 miss" in again.stdout, again.stdout + again.stderr
    assert "Stages: retrieve 13 hit/0 miss; generate 13 hit/0 miss" in again.stdout


def test_procpool_stage_counts_survive_the_looks_of_until_decided(venv: Venv, tmp_path: Path) -> None:
    """Batch by batch (--until-decided), the stage hits and misses counted in the workers are added
    up over the looks, as the local executor counts them in its own process."""
    lines = {}
    for executor in ("local", "procpool"):
        project = example("support_rag", tmp_path / executor, tmp_path / f"{executor}-marks")
        proc = venv.oloproof("run", "--executor", executor, "--until-decided", "--batch", "5", cwd=project)
        assert proc.returncode in (0, 1, 3), proc.stdout + proc.stderr
        lines[executor] = [line for line in proc.stdout.splitlines() if line.startswith("Stages:")]
    assert lines["procpool"] == lines["local"] != [], lines
    assert " 0 hit/0 miss" not in lines["procpool"][0]


def test_procpool_workers_read_the_jsonfolder_store(venv: Venv, tmp_path: Path) -> None:
    """The two packages together: the workers reopen the third-party store (``work.store_opener``)
    read-only for the stage caches, and the run's process alone writes it."""
    project = example("support_rag", tmp_path / "both")
    config = project / "oloproof.yaml"
    config.write_text(config.read_text(encoding="utf-8")
                      + "store: {type: jsonfolder}\nexecutor: {type: procpool, workers: 2, batch_size: 4}\n",
                      encoding="utf-8")
    first = venv.oloproof("run", cwd=project)
    assert first.returncode == 3, first.stdout + first.stderr
    assert "Stages: retrieve 0 hit/13 miss; generate 0 hit/13 miss" in first.stdout
    shutil.rmtree(project / ".oloproof-json" / "cache" / "execution")  # the store is a folder: clear a cache by hand
    again = venv.oloproof("run", cwd=project)
    assert "Cache: execution 0 hit/13 miss; judgment 0 hit/65 miss" in again.stdout, again.stdout + again.stderr
    assert "Stages: retrieve 13 hit/0 miss; generate 13 hit/0 miss" in again.stdout
    check = venv.oloproof("store", "check", cwd=project)
    assert check.returncode == 0 and check.stdout.splitlines()[-1] == "No damage found", check.stdout + check.stderr
    assert "2 runs (26 case records)" in check.stdout


SLOW_APP = '''
import os, time
from pathlib import Path
from oloproof import system

@system(name="slow", version="1")
def run(input):
    (Path(MARKS) / f"{os.getpid()}-{input['q'].replace(' ', '_')}").touch()
    time.sleep(PAUSE)
    return {"answer": input["q"]}
'''


def session_processes(session: int) -> dict[int, str]:
    """The live processes (zombies left out) of a session: pid -> command line, from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended while we looked
            continue
        state, _, _, sid = stat.rsplit(")", 1)[1].split()[:4]
        if int(sid) == session and state != "Z":
            found[int(entry.name)] = command
    return found


def alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def wait_for(predicate, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def slow_project(root: Path, marks: Path, count: int) -> Path:
    """``count`` cases of a quarter of a second each, on two workers, two cases a batch; each case
    leaves a mark named after its worker's pid."""
    marks.mkdir()
    root.mkdir()
    (root / "app.py").write_text(f"MARKS, PAUSE = {str(marks)!r}, 0.25\n" + SLOW_APP, encoding="utf-8")
    (root / "oloproof.yaml").write_text(
        'system: {name: slow, version: "1", callable: app:run}\ncases: cases.jsonl\n'
        "executor: {type: procpool, workers: 2, batch_size: 2}\n"
        "evaluators:\n  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}\n",
        encoding="utf-8")
    (root / "cases.jsonl").write_text("".join(json.dumps({"id": f"c{i:03d}", "input": {"q": f"answer {i}"},
                                                          "expected": {"answer": f"answer {i}"}}) + "\n"
                                              for i in range(count)), encoding="utf-8")
    return root


class Started:
    """``oloproof run`` in a session of its own: every process it starts is found by the session id
    (its pid), whatever its parent."""

    def __init__(self, venv: Venv, project: Path):
        self.proc = subprocess.Popen([str(venv.bin / "oloproof"), "run"], cwd=project, env=clean_env(), text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.pid, self.db = self.proc.pid, project / ".oloproof" / "store.db"

    def cached(self) -> int:
        try:
            with sqlite3.connect(self.db, timeout=1) as con:
                return con.execute("SELECT count(*) FROM cache WHERE ns = 'execution'").fetchone()[0]
        except sqlite3.Error:  # not made yet
            return 0

    def workers(self) -> dict[int, str]:
        return {pid: c for pid, c in session_processes(self.pid).items() if "spawn_main" in c}

    def busy(self, marks: Path) -> set[int]:
        """Once both workers have executed cases and some are cached: their pids, seen alive."""
        wait_for(lambda: self.db.exists() and self.cached() >= 4 and len(pids(marks) - {self.pid}) == 2)
        busy = set(self.workers())  # the checks after the run see live workers: they can fail
        assert busy == pids(marks) - {self.pid}, (busy, pids(marks))
        return busy

    def finish(self) -> tuple[str, str]:
        try:
            return self.proc.communicate(timeout=60)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.mark.skipif(sys.platform != "linux", reason="reads the process table from /proc")
@pytest.mark.parametrize("target", ["process", "group"])
def test_ctrl_c_stops_the_run_and_leaves_no_worker(venv: Venv, tmp_path: Path, target: str) -> None:
    """``process``: SIGINT to the run's process alone, so only the executor can stop the workers;
    ``group``: to its whole process group, as a terminal's Ctrl-C (the workers ignore it)."""
    marks, count = tmp_path / "marks", 40
    project = slow_project(tmp_path / "slow", marks, count)
    run = Started(venv, project)
    try:
        busy = run.busy(marks)
        started = len(list(marks.iterdir()))
        (os.killpg if target == "group" else os.kill)(run.pid, signal.SIGINT)
        signalled = time.monotonic()
    finally:
        out, err = run.finish()
    took = time.monotonic() - signalled
    assert run.proc.returncode == 130, (out, err)
    assert re.match(r"Run run_\w{26} \[UNDECIDED/INTERRUPTED\]", out), out
    assert "Traceback" not in err, err
    finished, missing = map(int, re.search(r"(\d+) / \d+ observed · (\d+) missing", out).groups())
    assert finished >= 4 and missing > 0 and finished + missing == count, out

    # at the moment the run's process is gone, so is every worker: killed, not left to finish its batch
    assert run.workers() == {}, run.workers()
    assert pids(marks) - {run.pid} == busy and not [pid for pid in busy if alive(pid)]
    assert len(list(marks.iterdir())) - started <= 2, "at most the cases in flight started after Ctrl-C"
    assert took < 20, f"the run took {took:.1f} s to stop"
    wait_for(lambda: session_processes(run.pid) == {}, 10)  # multiprocessing's resource tracker ends with it

    if target == "process":  # the interrupted run is resumed from the execution cache
        resumed = venv.oloproof("run", cwd=project)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        hits, misses = map(int, re.search(r"Cache: execution (\d+) hit/(\d+) miss", resumed.stdout).groups())
        assert hits >= finished and hits + misses == count
        assert f"{count} / {count} observed · 0 missing" in resumed.stdout


@pytest.mark.skipif(sys.platform != "linux", reason="reads the process table from /proc")
def test_a_worker_killed_mid_run_leaves_its_batch_missing(venv: Venv, tmp_path: Path) -> None:
    marks, count = tmp_path / "marks", 40
    run = Started(venv, slow_project(tmp_path / "slow", marks, count))
    try:
        victim = min(run.busy(marks))
        os.kill(victim, signal.SIGKILL)  # out of memory, say: its batch never comes back
    finally:
        out, err = run.finish()
    assert run.proc.returncode == 0, (out, err)  # a missing case is counted, not an error of the run
    assert re.match(r"Run run_\w{26} \[UNGATED/COMPLETE\]", out), out
    finished, missing = map(int, re.search(r"(\d+) / \d+ observed · (\d+) missing", out).groups())
    assert finished >= 4 and missing > 0 and finished + missing == count, out
    assert "error: procpool worker lost" in out, out
    assert run.workers() == {}, "the pool's other worker was stopped with it"
    resumed = venv.oloproof("run", cwd=run.db.parent.parent)  # the missing cases run on new workers
    assert f"{count} / {count} observed · 0 missing" in resumed.stdout, resumed.stdout + resumed.stderr

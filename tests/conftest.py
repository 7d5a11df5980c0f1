"""Shared fixtures: a project written into tmp_path and the real `oloproof` command run on it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

# A test run started as a background job of a non-interactive shell inherits SIGINT ignored, and its
# children would too: the interrupt tests' Ctrl-C would do nothing. A handler of our own is reset to
# the default in every child at exec, so each `oloproof` the tests start gets Ctrl-C as a user does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


class QuietServer(ThreadingHTTPServer):
    """A threaded server whose handler errors (a client that gave up) are expected, not printed."""

    daemon_threads = False
    block_on_close = True  # server_close() joins every handler thread: nothing outlives the test
    request_queue_size = 128  # socketserver's 5 drops connections when 16 open at once on a busy machine

    def handle_error(self, request, client_address) -> None:
        pass


class Served:
    """A server running in a thread; ``stop()`` shuts it down and joins everything."""

    def __init__(self, handler: type, port: int = 0, **state):
        self.server = QuietServer(("127.0.0.1", port), handler)
        self.server.__dict__.update(state)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/answer"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class Result:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def text(self) -> str:
        return self.out + self.err

    def __repr__(self) -> str:
        return f"<exit {self.code}\n{self.out}\n{self.err}>"


def olo(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> Result:
    """Run the real command line (``python -m oloproof``) in ``cwd``."""
    full_env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "oloproof", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return Result(proc)


APP = '''
from oloproof import system

@system(name="echo", version="1")
def run(input):
    if input.get("boom"):
        raise RuntimeError("boom")
    return {"answer": input["q"]}
'''


class Project:
    def __init__(self, root: Path):
        self.root = root

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def cases(self, rows: list[dict], name: str = "cases.jsonl") -> Path:
        return self.write(name, "".join(json.dumps(r) + "\n" for r in rows))

    def run(self, *args: str, **kw) -> Result:
        return olo(*args, cwd=self.root, **kw)

    def cache_judgments(self) -> None:
        """Every evaluator of the suite (each written ``- {type: ...}`` on its line) with ``cache: true``:
        in-process ones such as `contains` are made on every run by default; a test that watches the
        judgment cache keeps them there."""
        import re

        text = (self.root / "oloproof.yaml").read_text(encoding="utf-8")
        self.write("oloproof.yaml", re.sub(r"(?m)^(\s*- \{type: .*)\}$", r"\1, cache: true}", text))

    def runs(self) -> list[str]:
        import sqlite3

        db = self.root / ".oloproof" / "store.db"
        if not db.exists():
            return []
        with sqlite3.connect(db) as con:
            return [r[0] for r in con.execute("SELECT id FROM runs ORDER BY id")]


CONFIG = """
system:
  name: echo
  version: "1"
  callable: app:run
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
"""


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """An echo system, a contains evaluator and no policy; tests add cases and settings."""
    p = Project(tmp_path)
    p.write("app.py", APP)
    p.write("oloproof.yaml", CONFIG)
    return p


def case(i: int, ok: bool = True, **extra) -> dict:
    return {"id": f"c{i:03d}", "input": {"q": f"answer {i}" if ok else "nope", **extra},
            "expected": {"answer": f"answer {i}"}, "metadata": {"topic": "even" if i % 2 == 0 else "odd"}}


def pytest_collection_modifyitems(config, items) -> None:
    """A test that needs the PostgreSQL server is a `service` test, however it reaches the fixture."""
    for item in items:
        if "pg_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.service)


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server for this pytest run (tests/pg_server.py); skipped where none can start,
    except in CI (CI=true), where that is a failure."""
    try:
        import psycopg  # noqa: F401 - the postgres extra

        from pg_server import Server

        server = Server().start()
    except Exception as exc:  # noqa: BLE001 - any reason the server cannot start is reported as the reason
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL could not be started: {exc}")
        pytest.skip(f"PostgreSQL could not be started: {exc}")
    yield server
    server.stop()


@pytest.fixture
def pg_schema(pg_server, request) -> str:
    """A fresh, empty PostgreSQL schema name for one test."""
    import re
    import secrets

    return "t_" + re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40] + "_" + secrets.token_hex(3)

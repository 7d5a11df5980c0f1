"""What untrusted text tests share: a project on either store, a service answering raw bodies,
the replay judge, and the run's records read back through `oloproof export`.

A project's store is ``local`` (the SQLite store under .oloproof/) or ``postgres`` (a fresh schema
of the session's server, made with `oloproof store init`); every command goes through the real
command line either way.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler

import pytest
from conftest import Project, Served

STORES = ["local", pytest.param("postgres", marks=pytest.mark.service)]


def on_store(request, project: Project, kind: str) -> Project:
    """``project`` writing to the store ``kind``: its env in ``project.env`` (pass it to every command)."""
    project.env = {}
    if kind == "postgres":
        server = request.getfixturevalue("pg_server")
        schema = request.getfixturevalue("pg_schema")
        project.env = {"OLOPROOF_DSN": server.url()}
        with open(project.root / "oloproof.yaml", "a", encoding="utf-8") as handle:
            handle.write(f'\nstore: {{type: postgres, dsn: "${{OLOPROOF_DSN}}", schema: {schema}}}\n')
        made = project.run("store", "init", env=project.env)
        assert made.code == 0, made
    return project


def olo_env(project: Project, *args: str, **kw):
    return project.run(*args, env={**getattr(project, "env", {}), **kw.pop("env", {})}, **kw)


def run_id(result) -> str:
    found = re.search(r"run_[0-9A-Z]{26}", result.out)
    assert found, result
    return found.group()


def records(project: Project, run: str) -> dict[str, dict]:
    """case id -> its stored record, from the run's exported bundle."""
    exported = olo_env(project, "export", run)
    assert exported.code == 0, exported
    text = (project.root / ".oloproof" / "bundles" / run / "cases.jsonl").read_text(encoding="utf-8")
    return {r["id"]: r for r in map(json.loads, text.split("\n")[:-1])}  # JSONL: \n alone ends a line


class RawHandler(BaseHTTPRequestHandler):
    """Answers 200 with the raw body ``server.bodies[input["k"]]`` (bytes), counting attempts."""

    protocol_version = "HTTP/1.1"
    timeout = 10

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        state = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = body["k"]
        with state.lock:
            state.attempts[key] = state.attempts.get(key, 0) + 1
        raw = state.bodies.get(key, b'{"answer": "ok"}')
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def serve(bodies: dict[str, bytes]) -> Served:
    return Served(RawHandler, bodies=bodies, attempts={}, lock=threading.Lock())


def http_config(url: str, extra: str = "") -> str:
    return f"""
system:
  name: raw
  version: "1"
  http:
    url: {url}
    retries: 2
    backoff: 0.01
    timeout: 20
cases: cases.jsonl
concurrency: 4
evaluators:
  - {{type: contains, criterion: answer_correct, field: answer, expected_field: answer}}
{extra}"""


def replay_judge(marker: str = "RUBRIC-MARK") -> str:
    """A rubric judge answered by the replay provider from replies.jsonl."""
    return (f'  - {{type: rubric_judge, criterion: helpful, rubric: "{marker}: is it helpful?", provider: replay, '
            'model: replay, provider_options: {file: replies.jsonl}}\n')


# The triggers of a service gone wrong: the body a system's HTTP service answers 200 with. The
# provider stand-in's HOSTILE (tests/provider_standin.py) holds the same for a judge's provider.
TRIGGERS = {
    "surrogate": b'{"answer": "ok \\ud800"}',  # a lone surrogate escape: kept, escaped, noted
    "cut_emoji": b'{"answer": "ok cut \\ud83d"}',  # a reply cut between the halves of an emoji
    "cut_bytes": '{"answer": "ok cut \U0001f600"}'.encode()[:-3],  # the body cut inside an emoji's bytes
    "nan": b'{"answer": NaN}',
    "overflow": b'{"answer": 1e400}',
    "deep": b'{"answer": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "duplicate": b'{"answer": "ok", "answer": "no"}',
    "control": b'{"answer": "ok \\u001b[2J\\u001b]0;owned\\u0007 <script>alert(1)</script> \\u0000\\u0008\\u009b"}',
}


def standin_judge(url: str, marker: str = "RUBRIC-MARK") -> str:
    """A rubric judge asking the provider stand-in at ``url`` (openai wire, no key, no backoff)."""
    return (f'  - {{type: rubric_judge, criterion: helpful, rubric: "{marker}: is it helpful?", provider: openai, '
            f'model: standin, question_field: q, provider_options: {{base_url: "{url}", api_key_env: null, '
            'backoff: 0.0, retries: 1}}\n')

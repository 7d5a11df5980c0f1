"""The http system's client (aiohttp's own session): what it sends and what it does not keep, through
the real CLI against a server on 127.0.0.1 that records every request."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

import pytest
from conftest import Served
from test_http import exported, http_case, http_config, run_id


class Recording(BaseHTTPRequestHandler):
    """Answers ``{"answer": q}`` with a cookie; ``redirect`` answers 307 to itself instead."""

    protocol_version = "HTTP/1.1"
    timeout = 10
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                         "body": body, "connection": self.client_address})
        if body.get("mode") == "redirect":
            return self.reply(307, {"moved": True}, {"Location": "/elsewhere"})
        return self.reply(200, {"answer": body["q"]}, {"Set-Cookie": "session=abc; Path=/"})

    def reply(self, status: int, payload: object, headers: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        pass


@pytest.fixture
def recording():
    served = Served(Recording, lock=threading.Lock(), requests=[])
    yield served
    served.stop()


def test_the_client_sends_json_keeps_no_cookie_and_follows_no_redirect(project, recording):
    project.write("oloproof.yaml", http_config(recording.url, '    headers: {X-Team: "search"}\n', "concurrency: 1\n"))
    project.cases([http_case("c1"), http_case("c2", note="é"), http_case("moved", mode="redirect")])
    result = project.run("run")
    assert result.code == 0, result
    records = exported(project, run_id(result))
    assert records["c1"]["output"] == "answer c1" and records["c2"]["output"] == "answer c2"
    assert records["moved"]["missing"] == "http_error: 307"  # not followed, not retried
    requests = recording.server.requests
    assert [r["path"] for r in requests] == ["/answer"] * 3  # nothing sent to /elsewhere
    assert requests[1]["body"] == {"q": "answer c2", "note": "é"}
    for sent in requests:
        assert sent["headers"]["content-type"] == "application/json" and sent["headers"]["x-team"] == "search"
        assert "cookie" not in sent["headers"]  # the Set-Cookie of every answer is never sent back
    assert len({r["connection"] for r in requests}) == 1  # one kept-alive connection at concurrency 1


def test_an_invalid_url_is_a_config_error(project):
    project.write("oloproof.yaml", http_config("http://:80/answer"))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 2, result
    assert "url 'http://:80/answer' is not a valid URL" in result.err and "fix: write http://host:port/path" in result.err
    assert project.runs() == []

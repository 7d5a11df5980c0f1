"""One timer per attempt: the plugin's aiohttp session ends an attempt after ``timeout`` by itself
(never rounded up to a whole second), any other client runs each attempt under
``asyncio.timeout``; a body whose declared length is within ``max_response_bytes`` is read at once."""

from __future__ import annotations

import asyncio
import gzip
import json
from http.server import BaseHTTPRequestHandler

import pytest
from conftest import Served
from test_http import serve_faults

from oloproof import CaseMissing, SystemContext


def system(url: str, **options):
    from oloproof_http import HttpSystem, Options

    return HttpSystem(Options(url=url, **options), SystemContext(name="s", version="1", project_dir="."))


class Case:
    def __init__(self, **input_):
        self.input = input_


@pytest.fixture
def fault_server():
    served = serve_faults()
    yield served
    served.stop()


@pytest.mark.parametrize("seconds", [0.25, 30.0])
def test_the_plugins_session_bounds_each_attempt_by_itself(seconds):
    import httpx
    from oloproof_http import bounds_attempts

    async def made():
        http = system("http://127.0.0.1:9/x", timeout=seconds)
        session = http.make_client()
        try:
            return session.timeout, bounds_attempts(session, seconds), bounds_attempts(session, seconds + 1)
        finally:
            await session.close()

    timeout, bounded, other = asyncio.run(made())
    assert timeout.total == seconds and timeout.ceil_threshold >= seconds  # a 30 s timeout stays 30 s
    assert bounded and not other
    assert not bounds_attempts(httpx.AsyncClient(timeout=seconds), seconds)  # httpx: asyncio.timeout per attempt


def test_a_slow_answer_is_a_timeout_through_the_session_and_through_httpx(fault_server):
    import httpx

    for make in (None, lambda: httpx.AsyncClient()):
        http = system(fault_server.url, timeout=0.2, retries=0)
        if make is not None:
            http.make_client = make

        async def send(http):
            try:
                return await http.request(Case(q="answer slow", mode="slow"))
            finally:
                await http.aclose()

        with pytest.raises(CaseMissing) as raised:
            asyncio.run(send(http))
        assert raised.value.reason == "timeout", make
        assert http.bounded is (make is None)


def test_a_body_of_exactly_max_response_bytes_is_read_whole(fault_server):
    reply = {"answer": ""}
    reply["answer"] = "x" * (200 - len(json.dumps(reply)))
    assert len(json.dumps(reply)) == 200  # what the server declares as Content-Length

    async def send(limit: int):
        http = system(fault_server.url, max_response_bytes=limit, retries=0)
        try:
            return await http.request(Case(q="answer exact", mode="reply", reply=reply))
        finally:
            await http.aclose()

    assert asyncio.run(send(200)) == reply
    with pytest.raises(CaseMissing) as raised:
        asyncio.run(send(199))
    assert raised.value.reason == "response_too_large: 200 bytes, over max_response_bytes 199"



class Compressed(BaseHTTPRequestHandler):
    """A gzip body of a few hundred bytes that inflates to 100,000."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        data = gzip.compress(json.dumps({"answer": "x" * 100_000}).encode("utf-8"))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        pass


def test_a_compressed_body_is_counted_as_it_inflates_not_by_its_declared_length():
    served = Served(Compressed)
    try:
        async def send(limit: int):
            http = system(served.url, max_response_bytes=limit, retries=0)
            try:
                return await http.request(Case(q="zipped"))
            finally:
                await http.aclose()

        assert asyncio.run(send(200_000)) == {"answer": "x" * 100_000}
        with pytest.raises(CaseMissing) as raised:
            asyncio.run(send(5_000))  # the declared length (a few hundred bytes) is within it
        assert raised.value.reason == "response_too_large: over max_response_bytes 5000"
    finally:
        served.stop()

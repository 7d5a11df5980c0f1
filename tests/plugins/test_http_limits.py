"""The http system's local limits: header values checked before anything runs, a response body
read no further than ``max_response_bytes``, and a request that cannot be built never retried."""

from __future__ import annotations

import asyncio
import json

import pytest
from test_http import http_case, http_config, serve_faults

from oloproof import CaseMissing, SystemContext


@pytest.fixture
def fault_server():
    served = serve_faults()
    yield served
    served.stop()


HEADER = '    headers: {Authorization: "Bearer ${TEST_API_KEY}"}\n'


@pytest.mark.parametrize(("value", "problem"), [
    ("", "header Authorization uses ${TEST_API_KEY}, but the environment variable TEST_API_KEY is empty"),
    ("   ", "the environment variable TEST_API_KEY is empty"),
    ("abc\r\nX-Injected: 1", "header Authorization uses ${TEST_API_KEY}, whose value holds a control character"),
])
def test_a_header_variable_must_make_a_valid_value_before_anything_runs(project, fault_server, value, problem):
    project.write("oloproof.yaml", http_config(fault_server.url, HEADER))
    project.cases([http_case("c1")])
    result = project.run("run", env={"TEST_API_KEY": value})
    assert result.code == 2, result
    [line] = result.err.splitlines()
    assert problem in line and "fix: export TEST_API_KEY" in line, line
    assert "abc" not in line  # the value itself is never printed
    assert project.runs() == [] and fault_server.server.attempts == {}


def test_a_control_character_written_in_a_header_is_a_config_error(project, fault_server):
    project.write("oloproof.yaml", http_config(fault_server.url, '    headers: {X-Team: "a\\nb"}\n'))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 2, result
    assert "header X-Team holds a control character" in result.err
    assert fault_server.server.attempts == {}


@pytest.mark.slow
def test_a_response_over_max_response_bytes_is_missing_and_not_retried(project, fault_server):
    project.write("oloproof.yaml", http_config(fault_server.url, "    max_response_bytes: 2000\n"))
    project.cases([http_case("small", mode="reply", reply={"answer": "answer small"}),
                   http_case("big", mode="reply", reply={"answer": "x" * 5000})])
    result = project.run("run")
    assert result.code == 0, result
    assert "1 / 1 observed · 1 missing" in result.out
    lines = project.run("inspect", "latest", "--failures").out
    assert "missing: response_too_large: 5" in lines and "over max_response_bytes 2000" in lines, lines
    assert len(fault_server.server.attempts["answer big"]) == 1


def test_max_response_bytes_must_be_positive(project):
    project.write("oloproof.yaml", http_config("http://127.0.0.1:9/x", "    max_response_bytes: 0\n"))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 2 and "max_response_bytes must be at least 1, got 0" in result.err, result


def test_a_request_that_cannot_be_built_is_missing_at_once_with_what_is_wrong():
    import httpx
    from oloproof_http import HttpSystem, Options

    calls = []

    def refuse(request):
        calls.append(request)
        raise httpx.LocalProtocolError("Illegal header value b'x\\n'")

    system = HttpSystem(Options(url="http://127.0.0.1:9/x", retries=3, backoff=0.0),
                        SystemContext(name="s", version="1", project_dir="."))
    system.make_client = lambda: httpx.AsyncClient(transport=httpx.MockTransport(refuse))

    class Case:
        input = {"q": 1}

    with pytest.raises(CaseMissing) as raised:
        asyncio.run(system.request(Case()))
    assert raised.value.reason == "request_error: LocalProtocolError: Illegal header value b'x\\n'"
    assert len(calls) == 1
    # a transport failure is still retried
    calls.clear()

    def down(request):
        calls.append(request)
        raise httpx.ConnectError("refused")

    system.client = None
    system.make_client = lambda: httpx.AsyncClient(transport=httpx.MockTransport(down))
    with pytest.raises(CaseMissing) as raised:
        asyncio.run(system.request(Case()))
    assert raised.value.reason.startswith("connection_error: ConnectError (http") and len(calls) == 4
    assert json.loads(calls[0].content) == {"q": 1}


def test_a_streamed_body_is_cut_at_max_response_bytes():
    import httpx
    from oloproof_http import HttpSystem, Options

    sent = []

    def stream(request):
        async def chunks():  # no Content-Length: the limit is counted while reading
            for _ in range(100):
                sent.append(1)
                yield b"x" * 1000
        return httpx.Response(200, content=chunks())

    system = HttpSystem(Options(url="http://127.0.0.1:9/x", max_response_bytes=5000),
                        SystemContext(name="s", version="1", project_dir="."))
    system.make_client = lambda: httpx.AsyncClient(transport=httpx.MockTransport(stream))

    class Case:
        input = {"q": 1}

    with pytest.raises(CaseMissing) as raised:
        asyncio.run(system.request(Case()))
    assert raised.value.reason == "response_too_large: over max_response_bytes 5000"
    assert len(sent) < 10  # not read to the end

"""The viewer answers only its own names (DNS rebinding), and fails in one line: through real HTTP
on 127.0.0.1 with forged Host and Origin headers, against ``oloproof view`` in a subprocess."""

from __future__ import annotations

import asyncio
import http.client
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import case, olo
from oloproof_core.viewer.guard import Names, parse_authority, verdict

RUN_ID = re.compile(r"run_[0-9A-HJKMNP-TV-Z]{26}")


# -- the names, without a server ----------------------------------------------------------------

def test_authorities_parse_strictly():
    assert parse_authority("LocalHost:8765") == ("localhost", 8765)
    assert parse_authority("[::1]:80") == ("::1", 80)
    assert parse_authority("127.0.0.1") == ("127.0.0.1", None)
    for bad in (None, "", "a b", "a:b", "a:0", "a:65536", "[::1", "[evil]:1", "a:1:2", "a/b", "a@b", "é:1",
                "a\x1b:1", ":80", "a:+80", "a:٣"):
        assert parse_authority(bad) is None, bad


def test_a_loopback_viewer_answers_its_loopback_names_on_its_port_only():
    names = Names("127.0.0.1", 8765)
    for host in ("127.0.0.1:8765", "localhost:8765", "LOCALHOST:8765", "[::1]:8765"):
        assert names.allows(host), host
    for host in ("evil.example:8765", "127.0.0.1:8766", "127.0.0.1", "localhost", "127.0.0.2:8765",
                 "localhost.evil.example:8765", "0.0.0.0:8765"):
        assert not names.allows(host), host
    assert Names("127.0.0.1", 80).allows("localhost")  # no port is port 80


def test_explicit_names_wildcards_and_the_address_reached():
    named = Names("viewer.internal", 9000, allowed=["proxy.example.com"])
    assert named.allows("viewer.internal:9000") and not named.allows("viewer.internal:9001")
    assert named.allows("proxy.example.com") and named.allows("proxy.example.com:9000")
    assert not named.allows("localhost:9000")
    anywhere = Names("0.0.0.0", 9000)
    assert anywhere.allows("localhost:9000") and anywhere.allows(f"{socket.gethostname()}:9000")
    assert anywhere.allows("192.0.2.7:9000", reached="192.0.2.7")  # the address the connection reached
    assert not anywhere.allows("192.0.2.7:9000", reached="192.0.2.8")
    assert not anywhere.allows("evil.example:9000", reached="192.0.2.7")
    assert Names("::", 9000).allows("[::ffff:10.1.2.3]:9000", reached="::ffff:10.1.2.3")


def test_a_request_that_may_change_something_needs_its_own_origin():
    names = Names("127.0.0.1", 8765)
    ok = {"Host": "127.0.0.1:8765", "Origin": "http://127.0.0.1:8765"}
    assert verdict(names, "POST", ok, None) is None
    assert verdict(names, "POST", {**ok, "Origin": "http://evil.example"}, None) == 403
    assert verdict(names, "POST", {**ok, "Origin": "null"}, None) == 403
    assert verdict(names, "POST", {"Host": ok["Host"]}, None) == 403
    assert verdict(names, "POST", {**ok, "Origin": "http://localhost:8765"}, None) == 403  # another origin
    assert verdict(names, "POST", {"Host": ok["Host"]}, None, routed=False) is None  # the router's 405
    assert verdict(names, "GET", {"Host": ok["Host"]}, None) is None
    assert verdict(names, "GET", {}, None) == 400


def test_the_origin_hook_guards_a_post_route_through_real_http():
    """The labelling page's POSTs to come: a route added to the viewer's app is refused unless its
    Origin is the viewer's, and answered when it is."""
    from aiohttp import web

    from oloproof_core.viewer.server import make_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = make_app(store=None, plugins=None, names=Names("127.0.0.1", port))

    async def label(request):
        return web.Response(text="labelled")

    app.router.add_post("/label", label)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.SockSite(runner, sock).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        own = f"127.0.0.1:{port}"
        assert request(port, "POST", "/label", {"Host": own, "Origin": f"http://{own}"}) == (200, "labelled")
        for origin in ({"Origin": "http://evil.example"}, {}, {"Origin": "null"}):
            status, body = request(port, "POST", "/label", {"Host": own, **origin})
            assert status == 403 and "labelled" not in body
        status, _ = request(port, "POST", "/label", {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"})
        assert status == 421
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


# -- the served viewer ----------------------------------------------------------------------------

def request(port: int, method: str, path: str, headers: dict, hosts: list[str] | None = None) -> tuple[int, str]:
    """One request to 127.0.0.1:port with exactly the Host header(s) given (none when absent)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for host in hosts or []:
            conn.putheader("Host", host)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def get(port: int, path: str, host: str | None) -> tuple[int, str]:
    return request(port, "GET", path, {"Host": host} if host is not None else {})


class Viewer:
    def __init__(self, cwd: Path, *args: str):
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "oloproof", "view", "--port", "0", *args], cwd=cwd,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        found = re.search(r"http://\S+:(\d+)/", line)
        assert found, (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.port = int(found.group(1))

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=20)
            return code, self.proc.stderr.read()
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A project with one run of three cases."""
    from conftest import APP, CONFIG, Project

    project = Project(tmp_path_factory.mktemp("guarded"))
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG)
    project.cases([case(i) for i in range(3)])
    result = project.run("run")
    assert result.code == 0, result
    return {"dir": project.root, "run_id": RUN_ID.search(result.out).group(0)}


@pytest.mark.slow
def test_a_forged_host_gets_no_data_from_any_page(stored):
    viewer = Viewer(stored["dir"])
    port, run_id = viewer.port, stored["run_id"]
    pages = ["/", f"/runs/{run_id}", f"/runs/{run_id}/cases/c001", "/objects/sha256:00"]
    try:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            status, body = get(port, f"/runs/{run_id}/cases/c001", host)
            assert status == 200 and "answer 1" in body, host
        for path in pages:
            for host in (f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}",
                         f"localhost:{port}.evil.example"):
                status, body = get(port, path, host)
                assert status in (421, 400), (path, host, status)
                assert run_id not in body and "answer 1" not in body and "c001" not in body
            status, body = get(port, path, None)  # no Host at all
            assert status == 400 and run_id not in body
            status, body = request(port, "GET", path, {}, hosts=[f"127.0.0.1:{port}", "evil.example"])
            assert status == 400 and run_id not in body
        assert request(port, "POST", "/", {"Host": f"127.0.0.1:{port}"})[0] == 405  # still no route that writes
    finally:
        code, err = viewer.stop()
    assert code == 0
    # aiohttp refuses a request with no Host itself: one line each, no traceback
    assert all(line.startswith("warning: viewer: ") for line in err.splitlines()), err


@pytest.mark.slow
def test_a_store_error_is_a_500_page_and_one_log_line(stored, tmp_path):
    import shutil

    root = tmp_path / "p"
    shutil.copytree(stored["dir"], root)
    with sqlite3.connect(root / ".oloproof" / "store.db") as con:  # the run's summary changed behind its seal
        con.execute("""UPDATE runs SET summary = replace(summary, '"exit_code": 0', '"exit_code": 1')""")
        assert con.execute("""SELECT count(*) FROM runs WHERE summary LIKE '%"exit_code": 1%'""").fetchone() == (1,)
    viewer = Viewer(root)  # the store opens: only that run is damaged
    port, run_id = viewer.port, stored["run_id"]
    try:
        status, body = get(port, f"/runs/{run_id}", f"127.0.0.1:{port}")
        assert status == 500
        assert "Traceback" not in body and 'File "' not in body
        assert "damaged" in body and "oloproof store check" in body
        assert get(port, "/runs/run_NOPE", f"127.0.0.1:{port}")[0] == 404  # and it keeps serving
    finally:
        code, err = viewer.stop()
    assert code == 0
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: GET /runs/{run_id}: ") and "damaged" in lines[0]


@pytest.mark.slow
def test_a_store_that_cannot_be_opened_stops_the_viewer_before_it_listens(stored, tmp_path):
    import shutil

    root = tmp_path / "p"
    shutil.copytree(stored["dir"], root)
    (root / ".oloproof" / "store.db").write_bytes(b"not a database, not at all" * 200)
    for name in ("store.db-wal", "store.db-shm"):
        (root / ".oloproof" / name).unlink(missing_ok=True)
    result = olo("view", "--port", "0", cwd=root, timeout=60)
    assert result.code == 2, result
    assert result.out == ""  # never listened
    assert result.err.count("\n") == 1 and result.err.startswith("error: .oloproof/store.db: the store could not be used")


@pytest.mark.slow
@pytest.mark.parametrize("port", ["99999", "-1", "http", "65536"])
def test_a_port_out_of_range_is_one_line(stored, port):
    result = olo("view", "--port", port, cwd=stored["dir"], timeout=60)
    assert result.code == 2, result
    assert result.err == (f"error: --port: {port!r} is not a port number; fix: pass a number from 1 to 65535, "
                          "or 0 for a free one\n")


@pytest.mark.slow
def test_every_address_warns_loudly_and_still_checks_host(stored):
    viewer = Viewer(stored["dir"], "--host", "0.0.0.0")
    port = viewer.port
    try:
        assert get(port, "/", f"127.0.0.1:{port}")[0] == 200
        assert get(port, "/", f"evil.example:{port}")[0] == 421
    finally:
        code, err = viewer.stop()
    assert code == 0
    assert err.startswith("WARNING: --host 0.0.0.0 is not a loopback address: every input, output, document and "
                          "judge rationale in the store becomes readable by anyone on the network"), err
    quiet = Viewer(stored["dir"], "--host", "localhost")
    code, err = quiet.stop()
    assert code == 0 and "WARNING" not in err


@pytest.mark.slow
def test_allow_host_adds_a_name(stored):
    viewer = Viewer(stored["dir"], "--allow-host", "viewer.example.com")
    port = viewer.port
    try:
        assert get(port, "/", "viewer.example.com")[0] == 200  # a reverse proxy's Host
        assert get(port, "/", f"viewer.example.com:{port}")[0] == 200
        assert get(port, "/", "evil.example")[0] == 421
    finally:
        viewer.stop()
    bad = olo("view", "--allow-host", "a b", cwd=stored["dir"], timeout=60)
    assert bad.code == 2 and bad.err.startswith("error: --allow-host: 'a b' is not a host name")


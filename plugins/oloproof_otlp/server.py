"""The receiver's HTTP/1.1 server: one thread running its own asyncio event loop.

An OTLP/HTTP exporter sends whole bodies with a ``Content-Length`` over a kept connection, a few
dozen requests a run; each is answered as soon as it is read. Nothing here polls: the loop
sleeps until a connection has data, and :meth:`Server.close` wakes it at once (the standard
library's ``ThreadingHTTPServer`` checks for shutdown every ``poll_interval``, which a traced run
paid at its end, and parses headers with the ``email`` package and starts a thread per
connection).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

HEAD_BYTES = 65_536  # the request line and headers, as the standard library's http.server allows


def listening(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port`` (0: a free one); OSError when it cannot."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server: a port in TIME_WAIT is free
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def parse_head(head: bytes) -> tuple[str, str, bool, dict] | None:
    """(method, target, HTTP/1.1 or later, headers) of a request's head, or None when malformed."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers[name.lower()] = value.strip()
    return parts[0], parts[1], parts[2] != "HTTP/1.0", headers


class Exchange(asyncio.Protocol):
    """One connection: its requests read in turn, each answered before the next is read."""

    def __init__(self, server: Server, connections: set):
        self.server, self.connections = server, connections
        self.transport: Any = None
        self.buffer = bytearray()
        self.request: tuple | None = None  # (method, target, keep alive, headers, length) of the body awaited
        self.discard = 0  # bytes of a refused body still to drop before the connection closes

    # asyncio.Protocol

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.connections.add(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.connections.discard(self)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.discard:
            dropped = min(self.discard, len(data))
            self.discard -= dropped
            data = data[dropped:]
            if not self.discard:
                self.transport.close()
            return
        self.buffer += data
        while self.transport is not None and not self.transport.is_closing():
            if self.request is None and not self._head():
                return
            method, target, keep, headers, length = self.request
            if len(self.buffer) < length:
                return
            body = bytes(self.buffer[:length])
            del self.buffer[:length]
            self.request = None
            if method != "POST":
                self._answer(405, b"send spans with POST", "text/plain", keep, {"Allow": "POST"})
                continue
            try:
                answer = self.server.handle(target, headers, body)
            except Exception as exc:  # noqa: BLE001 - the exporter's 500; the server goes on
                answer = 500, f"the request could not be filed: {type(exc).__name__}".encode(), "text/plain"
            self._answer(*answer, keep)

    def _head(self) -> bool:
        """Whether a request's head was read (``self.request`` set); False when more is needed
        or the request was refused."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > HEAD_BYTES:
                self._answer(431, b"the request's headers are too long", "text/plain", False)
            return False
        parsed = parse_head(bytes(self.buffer[:end]))
        del self.buffer[:end + 4]
        if parsed is None:
            self._answer(400, b"not an HTTP/1.x request", "text/plain", False)
            return False
        method, target, keep, headers = parsed
        keep = headers.get("connection", "").lower() != "close" if keep else \
            headers.get("connection", "").lower() == "keep-alive"
        if "transfer-encoding" in headers:  # a chunked body: no length to read it by
            self._answer(411, b"an OTLP/HTTP request needs a Content-Length", "text/plain", False)
            return False
        length_text = headers.get("content-length", "0" if method != "POST" else "")
        if not length_text.isdigit():
            self._answer(411, b"an OTLP/HTTP request needs a Content-Length", "text/plain", keep and not length_text)
            return False
        length = int(length_text)
        if length > self.server.max_request_bytes:
            self._answer(413, b"the OTLP request is larger than max_request_bytes", "text/plain", True)
            self.discard = length - min(length, len(self.buffer))  # read and drop, then close
            self.buffer.clear()
            if not self.discard:
                self.transport.close()
            return False
        if headers.get("expect", "").lower() == "100-continue":
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.request = (method, target, keep, headers, length)
        return True

    def _answer(self, status: int, body: bytes, content_type: str, keep: bool, extra: dict | None = None) -> None:
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Content-Type: {content_type}",
                 f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in (extra or {}).items())]
        if not keep:
            lines.append("Connection: close")
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        if not keep:
            self.transport.close()


class Server:
    """``handle(path, headers, body) -> (status, body, content type)`` answering the POST requests
    that reach ``sock`` (header names lower case): on a thread of its own, and from
    :meth:`serve_here` on, new connections on the event loop that called it."""

    def __init__(self, sock: socket.socket, handle: Callable[[str, dict, bytes], tuple], max_request_bytes: int,
                 name: str = "oloproof-otlp"):
        self.sock, self.handle, self.max_request_bytes = sock, handle, max_request_bytes
        self.connections: set[Exchange] = set()  # the thread's
        self.listening: Any = None  # the thread's asyncio server, until serve_here
        self.here: tuple | None = None  # (event loop, asyncio server, its connections) of serve_here
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._started = threading.Event()
        self.thread.start()
        self._started.wait()

    def _serve(self) -> None:
        loop = self.loop
        try:
            self.listening = loop.run_until_complete(
                loop.create_server(lambda: Exchange(self, self.connections), sock=self.sock))
        finally:
            self._started.set()
        try:
            loop.run_forever()
        finally:
            if self.listening is not None:
                self.listening.close()
            for exchange in list(self.connections):
                if exchange.transport is not None:
                    exchange.transport.abort()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _stop_listening(self) -> None:  # on the thread
        if self.listening is not None:
            self.listening.close()
            self.listening = None

    async def serve_here(self) -> None:
        """Accept new connections on the running event loop from now on; the thread keeps
        serving the connections it has. Where the cases wait on that loop, a request is then
        filed, and its cases woken, with no thread switch and no contention for the GIL."""
        loop = asyncio.get_running_loop()
        if self.here is not None:
            if self.here[0] is loop:
                return
            self._close_here()
        connections: set[Exchange] = set()
        self.here = (loop, None, connections)
        served = await loop.create_server(lambda: Exchange(self, connections), sock=self.sock.dup())
        self.here = (loop, served, connections)
        try:
            self.loop.call_soon_threadsafe(self._stop_listening)
        except RuntimeError:  # the thread's loop has closed
            pass

    def _close_here(self) -> None:
        if self.here is None:
            return
        _, served, connections = self.here
        self.here = None
        try:
            if served is not None:
                served.close()
            for exchange in list(connections):
                if exchange.transport is not None:
                    exchange.transport.abort()
        except RuntimeError:  # that loop has closed: its sockets go with it
            pass

    async def aclose(self) -> None:
        """:meth:`close`, from the loop of :meth:`serve_here`: its connections end there too."""
        self.close()
        await asyncio.sleep(0)  # the aborted connections' sockets close on this loop's next turn

    def close(self) -> None:
        """Stop at once: the loops are woken, the connections and the sockets closed."""
        self._close_here()
        if self.thread.is_alive():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # the loop has already closed
                pass
            self.thread.join(5)
        self.sock.close()

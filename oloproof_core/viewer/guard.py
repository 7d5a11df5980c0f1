"""Whom the viewer answers: the Host a request must carry (and, for a request that may change
something, its Origin), checked against the names the viewer was started for.

DNS rebinding is the attack: a page on ``evil.example`` points its own name at 127.0.0.1 after
loading, and then reads the viewer as its own origin. The browser still sends ``Host:
evil.example:PORT``, which is not one of the viewer's names, so the request gets 421 and no data.
A missing, repeated or malformed Host gets 400.

The viewer's names are the address it listens on, with its port; on a loopback address also
``127.0.0.1``, ``localhost`` and ``[::1]``; on every address (``0.0.0.0``, ``::``) those and this
machine's host names; and the names given with ``--allow-host``. An IP address equal to the one
the connection reached is always accepted (a rebinding attack needs a name, never an address).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

LOOPBACK = ("127.0.0.1", "localhost", "::1")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def is_wildcard(host: str) -> bool:
    """``0.0.0.0``, ``::`` or an empty host: every address of this machine."""
    address = _address(host)
    return host in ("", "*") or (address is not None and address.is_unspecified)


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback address (127.0.0.0/8, ::1)."""
    address = _address(host)
    if address is not None:
        return address.is_loopback
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    addresses = [_address(str(info[4][0])) for info in infos]
    return bool(addresses) and all(a is not None and a.is_loopback for a in addresses)


def parse_authority(value: str | None) -> tuple[str, int | None] | None:
    """``name``, ``name:port``, ``[v6]`` or ``[v6]:port`` as (the lower-cased name, the port or
    None); None when it is none of these."""
    if value is None or not value.isascii() or not value.isprintable():
        return None
    if not value or any(c in value for c in " \t/\\@?#%,;'\"<>"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1:]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
        if not name or ":" in port:
            return None
    if not rest:
        return name.lower(), None
    if not rest.startswith(":") or not rest[1:].isdigit() or not 0 < int(rest[1:]) <= 65535:
        return None
    return name.lower(), int(rest[1:])


class Names:
    """The Host values the viewer answers: see the module's docstring."""

    def __init__(self, host: str, port: int, allowed: Iterable[str] = ()):
        self.port = port
        self.names = {host.lower().strip("[]")}
        if is_wildcard(host) or is_loopback(host):
            self.names.update(LOOPBACK)
        if is_wildcard(host):
            self.names.update(n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n)
        self.addresses = {a for a in map(_address, self.names) if a is not None}
        self.names = {n for n in self.names if _address(n) is None}
        self.extra: set[tuple[str, int | None]] = set()
        for text in allowed:
            parsed = parse_authority(text)
            if parsed is None:
                raise ValueError(text)
            self.extra.add(parsed)

    def allows(self, value: str | None, reached: str | None = None) -> bool:
        """Whether a request with ``Host: value`` is for this viewer; ``reached`` is the local
        address its connection reached."""
        parsed = parse_authority(value)
        if parsed is None:
            return False
        name, port = parsed
        if (name, port) in self.extra or (port in (None, self.port) and (name, None) in self.extra):
            return True
        if (port or 80) != self.port:
            return False
        address = _address(name)
        if address is None:
            return name in self.names
        return address in self.addresses or (reached is not None and address == _address(reached))

    def same_origin(self, origin: str | None, host: str | None) -> bool:
        """Whether a request that may change something (not GET, HEAD or OPTIONS) comes from a
        page of this viewer: its Origin is ``http(s)://`` and the Host it was sent to. The hook
        for the labelling page's POSTs; there are none yet."""
        if not origin or not host:
            return False
        scheme, sep, authority = origin.partition("://")
        return bool(sep) and scheme.lower() in ("http", "https") and parse_authority(authority) == parse_authority(host)


def verdict(names: Names, method: str, headers: dict | object, reached: str | None, routed: bool = True) -> int | None:
    """The status a request is refused with (400 a missing, repeated or malformed Host, 421 another
    name's, 403 a request to a route that may change something from another origin), or None when
    it may be answered (``routed``: a route takes the method; otherwise the router answers 404/405)."""
    hosts = headers.getall("Host", []) if hasattr(headers, "getall") else [headers.get("Host")]
    hosts = [h for h in hosts if h is not None]
    if len(hosts) != 1 or parse_authority(hosts[0]) is None:
        return 400
    if not names.allows(hosts[0], reached):
        return 421
    if routed and method.upper() not in SAFE_METHODS and not names.same_origin(headers.get("Origin"), hosts[0]):
        return 403
    return None

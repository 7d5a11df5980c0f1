"""``system.http.interventions``: where a service takes a context, a top-k or a token budget.

A service that accepts an override in its request can be diagnosed like a staged system: the
gold-context intervention sends the gold passages where ``context`` says, top-k and token-budget
send their setting where ``top_k`` and ``token_budget`` say, and every control sends the request
unchanged. A place is a dotted path into the JSON body (``override.top_k``: the case's input with
``{"override": {"top_k": 4}}`` merged in) or a header (``header:X-Top-K``). A context goes as a
list of ``{doc_id, text}`` objects (``chunk_id`` too when a passage has one); in a header, as
that list's compact JSON.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from typing import Any

from oloproof import CaseMissing, ConfigError

SETTINGS = ("context", "top_k", "token_budget")
HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)


def check_places(places: dict[str, str]) -> None:
    """Each setting is one the interventions send, and each place a body path or a header name."""
    for setting, place in places.items():
        where = f"interventions.{setting}"
        if setting not in SETTINGS:
            close = difflib.get_close_matches(setting, SETTINGS, n=1)
            raise ConfigError(f"{where}: unknown setting {setting!r}; a service can take {', '.join(SETTINGS)}",
                              fix=f"rename it to {close[0]!r}" if close else f"use one of: {', '.join(SETTINGS)}")
        if not isinstance(place, str) or not place.strip():
            raise ConfigError(f"{where} must name where the request takes it, got {place!r}",
                              fix=f"write {where}: override.{setting} (a body path) or header:X-Name")
        if place.startswith("header:"):
            if not HEADER.match(place[len("header:"):]):
                raise ConfigError(f"{where}: {place[len('header:'):]!r} is not a header name",
                                  fix=f"write {where}: header:X-{setting.title().replace('_', '-')}")
        elif any(not part for part in place.split(".")):
            raise ConfigError(f"{where}: {place!r} has an empty part", fix=f"write {where}: override.{setting}")


def passages(context: Any) -> list[dict]:
    """A context's items as the list a service takes: ``{doc_id, text}`` (and ``chunk_id``)."""
    return [{"doc_id": item.doc_id, "text": item.text, **({"chunk_id": item.chunk_id} if item.chunk_id else {})}
            for item in context.items]


def with_overrides(body: dict, places: dict[str, str], values: dict[str, Any]) -> tuple[dict, dict[str, str]]:
    """The request body and the extra headers that carry ``values`` (setting -> value) at their
    places. A body path through a field of the input that is not an object cannot be written: the
    case is missing (``request_error``), as a request that cannot be built is."""
    body, headers = copy.deepcopy(body), {}
    for setting, value in values.items():
        place = places[setting]
        if place.startswith("header:"):
            headers[place[len("header:"):]] = value if isinstance(value, str) else json.dumps(
                value, ensure_ascii=True, separators=(",", ":"))
            continue
        *parents, last = place.split(".")
        node = body
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise CaseMissing(f"request_error: interventions.{setting}: the input's "
                                  f"{'.'.join(parents[:i + 1])} is not an object, so {place} cannot be set")
        node[last] = value
    return body, headers

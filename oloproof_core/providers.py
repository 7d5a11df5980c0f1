"""LLM providers for judges: one found by name, and a judge's reply read as a verdict.

Providers are plugins (``oloproof_register_providers``). A judge names one in its options
(``provider: openai``) and gets it from :func:`open_provider`, so a judge never imports a
provider plugin and any installed provider serves any judge.

Every judge shares one verdict contract (:func:`judgment_from_reply`): the model answers with a
JSON object ``{"verdict": "pass" | "fail", "rationale": "..."}``. Anything else is a missing
judgment with reason ``judge_unparseable`` and the raw reply in its detail, never a silent pass
or fail. docs/judges.md describes both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError
from .model import Judgment

VERDICTS = ("pass", "fail")
RATIONALE_CHARS = 500  # a short rationale is kept; a longer one is cut
RAW_CHARS = 4000  # how much of an unparseable reply is kept for `inspect`
FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def open_provider(name: str, model: str, options: Mapping[str, Any] | None = None, *,
                  what: str = "a judge", registry: Any = None) -> Any:
    """The provider ``name`` for ``model``, made from the judge's ``provider_options``.

    Raises ConfigError for an unknown provider, an option its ``Options`` rejects, or missing
    credentials, so a suite stops before any case runs.

    :param what: who asks, for messages (``"evaluator 'groundedness_judge'"``).
    :param registry: the providers registry; None builds one from the installed plugins
        (honouring ``OLOPROOF_DISABLE_PLUGINS``).
    """
    from .config import structure

    if registry is None:
        from .plugins import Plugins, disabled_from_env, make_plugin_manager

        registry = Plugins(make_plugin_manager(disabled=disabled_from_env())).providers
    try:
        entry = registry.get(name)
    except ConfigError as exc:
        raise ConfigError(f"{what} names {exc.problem}", where=exc.where, fix=exc.fix) from None
    data = {"model": model, **dict(options or {})}
    try:
        if entry.options is None:
            return entry.factory(None)
        made = structure(None, data, entry.options, ("provider_options",),
                         what=f"provider {name!r} from {entry.distribution}")
        return entry.factory(made)
    except ConfigError as exc:
        raise ConfigError(f"{what}, provider {name!r}: {exc.problem}", where=exc.where, fix=exc.fix) from None


def parse_verdict(text: str) -> tuple[str, str] | None:
    """``(verdict, rationale)`` from a reply holding one JSON verdict object, else None.

    The object may stand alone, sit in a Markdown code fence, or follow other text. Two objects
    with different verdicts make the reply ambiguous (None).
    """
    stripped = FENCE.sub("", text.strip())
    decoder = json.JSONDecoder(strict=False)  # a model may break a long rationale over lines
    found: list[dict] = []
    start = stripped.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(stripped, start)
        except ValueError:
            start = stripped.find("{", start + 1)
            continue
        if isinstance(value, dict) and "verdict" in value:
            found.append(value)
        start = stripped.find("{", end)
    verdicts = {str(v["verdict"]).strip().casefold() if isinstance(v["verdict"], str) else None for v in found}
    if len(verdicts) != 1 or not verdicts <= set(VERDICTS):
        return None
    rationale = found[0].get("rationale", "")
    rationale = " ".join(rationale.split()) if isinstance(rationale, str) else ""
    if len(rationale) > RATIONALE_CHARS:
        rationale = rationale[:RATIONALE_CHARS - 1] + "…"
    return verdicts.pop(), rationale


def judgment_from_reply(reply: Any, *, prompt_version: str, **detail: Any) -> Judgment:
    """The judgment a judge's reply gives: pass or fail with the verdict, rationale, usage and
    prompt version in its detail; or missing (``judge_unparseable``) with the raw reply kept.

    :param reply: what ``provider.complete`` returned (``text``, ``usage``).
    :param detail: more to record, e.g. the passages the judge was shown.
    """
    text = reply.text if isinstance(reply.text, str) else ""
    record = {"usage": dict(reply.usage or {}), "prompt_version": prompt_version, **detail}
    parsed = parse_verdict(text)
    if parsed is None:
        raw = text if len(text) <= RAW_CHARS else text[:RAW_CHARS - 1] + "…"
        return Judgment(status="missing", reason="judge_unparseable", detail={"raw": raw, **record})
    verdict, rationale = parsed
    return Judgment.of(verdict == "pass", None, verdict=verdict, rationale=rationale, **record)

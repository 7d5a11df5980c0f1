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

import contextlib
import contextvars
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from attrs import field, frozen

from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import Judgment, select

VERDICTS = ("pass", "fail")
RATIONALE_CHARS = 500  # a short rationale is kept; a longer one is cut
RAW_CHARS = 4000  # how much of an unparseable reply is kept for `inspect`
FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


# the providers of the suite being loaded: its plugins, disable_plugins: honoured, no manager a judge
_LOADING: contextvars.ContextVar[Any] = contextvars.ContextVar("oloproof_providers", default=None)


@contextlib.contextmanager
def suite_providers(registry: Any) -> Iterator[None]:
    """Within: :func:`open_provider` without a ``registry`` finds providers in ``registry``."""
    token = _LOADING.set(registry)
    try:
        yield
    finally:
        _LOADING.reset(token)


def open_provider(name: str, model: str, options: Mapping[str, Any] | None = None, *,
                  what: str = "a judge", registry: Any = None) -> Any:
    """The provider ``name`` for ``model``, made from the judge's ``provider_options``.

    Raises ConfigError for an unknown provider, an option its ``Options`` rejects, or missing
    credentials, so a suite stops before any case runs.

    :param what: who asks, for messages (``"evaluator 'groundedness_judge'"``).
    :param registry: the providers registry; None: the suite's while it loads (its evaluators are
        made inside :func:`suite_providers`), else one built from the installed plugins (honouring
        ``OLOPROOF_DISABLE_PLUGINS``).
    """
    return _open(name, model, options, what=what, registry=registry)[1]


def _open(name: str, model: str, options: Mapping[str, Any] | None, *, what: str, registry: Any) -> tuple[Any, Any]:
    """:func:`open_provider`, with the registry entry the provider came from: ``(entry, provider)``."""
    from oloproof_core.config.documents import structure

    registry = _LOADING.get() if registry is None else registry
    if registry is None:
        from oloproof_core.hooks.manager import Plugins, disabled_from_env, make_plugin_manager

        registry = Plugins(make_plugin_manager(disabled=disabled_from_env())).providers
    try:
        entry = registry.get(name)
    except ConfigError as exc:
        raise ConfigError(f"{what} names {exc.problem}", where=exc.where, fix=exc.fix) from None
    data = {"model": model, **dict(options or {})}
    try:
        if entry.options is None:
            return entry, entry.factory(None)
        made = structure(None, data, entry.options, ("provider_options",),
                         what=f"provider {name!r} from {entry.distribution}")
        return entry, entry.factory(made)
    except ConfigError as exc:
        raise ConfigError(f"{what}, provider {name!r}: {exc.problem}", where=exc.where, fix=exc.fix) from None


def provider_code(entry: Any, provider: Any) -> dict:
    """What a provider is beyond its options, for a judge's identity: the distribution that
    registered it and its version, and its code (:func:`~oloproof_core.engine.fingerprint.plugin_code`
    of the provider's class, and of its factory when that is a function). Editing a provider
    developed in place, or installing another version of it, therefore misses the judgment cache."""
    import inspect

    from oloproof_core.engine.fingerprint import plugin_code

    code = plugin_code(type(provider))
    if inspect.isfunction(entry.factory):  # a function that makes the provider: its code counts too
        code += plugin_code(entry.factory)
    return {"distribution": entry.distribution, "version": entry.version, "code": code}


def json_objects(text: str, key: str) -> list[dict]:
    """Every JSON object in a model's reply that has ``key``, in order: standing alone or among
    other text, a long string broken over lines included."""
    decoder = json.JSONDecoder(strict=False)  # a model may break a long rationale over lines
    found: list[dict] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict) and key in value:
            found.append(value)
        start = text.find("{", end)
    return found


def parse_verdict(text: str) -> tuple[str, str] | None:
    """``(verdict, rationale)`` from a reply holding one JSON verdict object, else None.

    The object may stand alone, sit in a Markdown code fence, or follow other text. Two objects
    with different verdicts make the reply ambiguous (None).
    """
    found = json_objects(FENCE.sub("", text.strip()), "verdict")
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


# -- a base for providers that speak JSON over HTTP (openai, anthropic, and yours) ----------------

RETRIED = (408, 409, 429)  # and every 5xx: statuses a later attempt may fix


def retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (delta-seconds or an HTTP date)."""
    import contextlib
    import email.utils
    import time

    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, float(headers.get("retry-after-ms")) / 1000)
    value = headers.get("retry-after")
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, float(value))
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    return None


def read_key(name: str | None, provider: str) -> str | None:
    """The API key from the environment variable ``name``; ConfigError naming it when unset."""
    import os

    if name is None:
        return None
    key = os.environ.get(name, "")
    if not key:
        raise ConfigError(f"the environment variable {name} is not set; the {provider} API key is read from it "
                          "(api_key_env)",
                          fix=f"export {name}=<your key>, or name another variable in provider_options.api_key_env")
    return key


@frozen
class Reply:
    """What a provider returns: the model's text and the usage (tokens, and cost when priced)."""

    text: str
    usage: dict


class JsonProvider:
    """Shared by providers over HTTP: the key from the environment, one pooled client shared by the
    judging threads (closed at exit), a concurrency limit, retries with exponential backoff and full
    jitter honouring Retry-After, and cost from the prices per million tokens.

    A subclass sets ``name`` and ``base_url_example`` and implements ``complete(prompt, *, system)``
    with :meth:`post` and :meth:`reply`. Its options class has ``model``, ``base_url``,
    ``api_key_env``, ``timeout``, ``retries``, ``backoff``, ``max_backoff``, ``concurrency`` and
    the two ``price_per_million_*_tokens``.
    """

    name = "provider"
    base_url_example = "http://host:port"
    LEAST = (("retries", 0), ("backoff", 0), ("max_backoff", 0), ("concurrency", 1), ("temperature", 0),
             ("max_tokens", 1), ("price_per_million_input_tokens", 0), ("price_per_million_output_tokens", 0))

    def __init__(self, options: Any):
        import threading

        self.check(options)
        self.options, self.model = options, options.model
        self._key = read_key(options.api_key_env, self.name)
        self._slots = threading.BoundedSemaphore(options.concurrency) if options.concurrency else None
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"<{type(self).__name__} {self.model} at {self.options.base_url}>"

    def check(self, options: Any) -> None:
        """Options the YAML types cannot rule out, each with its fix."""
        if not options.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url {options.base_url!r} is not an http(s) URL",
                              fix=f"write {self.base_url_example}")
        if options.timeout <= 0:
            raise ConfigError(f"timeout must be positive, got {options.timeout}", fix="write timeout: 60")
        for name, least in self.LEAST:
            value = getattr(options, name, None)
            if value is not None and value < least:
                raise ConfigError(f"{name} must be at least {least}, got {value}", fix=f"write {name}: {least}")
        if (options.price_per_million_input_tokens is None) != (options.price_per_million_output_tokens is None):
            raise ConfigError("give both price_per_million_input_tokens and price_per_million_output_tokens, or neither",
                              fix="add the missing price (0 if that side is free)")

    def client(self) -> Any:
        import atexit

        with self._lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=self.options.timeout)
                atexit.register(self._client.close)
            return self._client

    def reply(self, text: str, input_tokens: Any, output_tokens: Any) -> Reply:
        """A Reply with usage, and cost when the options give prices."""
        spent: dict = {"input_tokens": int(input_tokens or 0), "output_tokens": int(output_tokens or 0)}
        options = self.options
        if options.price_per_million_input_tokens is not None:
            spent["cost"] = (spent["input_tokens"] * options.price_per_million_input_tokens
                             + spent["output_tokens"] * options.price_per_million_output_tokens) / 1e6
        return Reply(text=text, usage=spent)

    def post(self, url: str, body: dict, headers: dict) -> Any:
        """The response's JSON, retrying what a later attempt may fix; EvaluationError otherwise."""
        import contextlib
        import random
        import time

        import httpx

        from oloproof_core.model.errors import EvaluationError

        options, problem = self.options, "provider_error: no_attempt"
        for attempt in range(options.retries + 1):
            wait = None
            try:
                with self._slots or contextlib.nullcontext():
                    response = self.client().post(url, json=body, headers=headers)
            except httpx.TimeoutException:
                problem = "provider_error: timeout"
            except httpx.TransportError as exc:
                problem = f"provider_error: connection_error: {type(exc).__name__}"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    from oloproof_core.model.untrusted import is_refusal, strict_json

                    try:  # strictly: NaN, 1e400, a duplicate key or deep nesting is this judgment's error
                        return strict_json(response.content)
                    except ValueError as exc:  # a reply was made (and maybe billed): not sent again
                        why = f": {exc}" if is_refusal(exc) else ""
                        raise EvaluationError(f"provider_error: invalid_json{why}") from None
                if status not in RETRIED and status < 500:  # the same request would fail the same way
                    raise EvaluationError(f"provider_error: {status}")
                problem, wait = f"provider_error: {status}", retry_after(response.headers)
            if attempt < options.retries:
                ceiling = min(options.max_backoff, options.backoff * 2 ** attempt)
                time.sleep(random.uniform(0, ceiling) if wait is None else min(wait, options.max_backoff))
        raise EvaluationError(problem)


# -- a base for LLM judges (groundedness, citation support, rubric, exact, and yours) -------------


@frozen(kw_only=True)
class JudgeOptions:
    """The options every LLM judge takes; subclass it (attrs) to add a judge's own."""

    provider: str  # a registered provider: openai, anthropic, or a plugin's
    model: str
    provider_options: dict[str, Any] = field(factory=dict)  # base_url, api_key_env, prices, timeout, ...
    criterion: str | None = None  # None: the judge's default criterion
    prompt: str = "v1"  # a prompt version shipped with the judge's package
    question_field: str | None = "question"  # a key of the case input; None: the whole input
    answer_field: str | None = "answer"  # a key of the output; None: the whole output


def text_of(value: Any) -> str:
    """A value as prompt text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


class LLMJudge:
    """An evaluator that asks a provider's model for a verdict with a versioned prompt.

    A subclass sets ``type_name`` (``groundedness_judge``), ``family`` (``groundedness``, the
    prompt version's prefix), ``default_criterion`` and ``prompts`` (every version it ever
    shipped, as ``prompts/<version>.system.txt`` and ``prompts/<version>.user.txt`` package data
    beside its module), and implements ``evaluate`` with :meth:`ask`. The prompt version and
    text, the provider (its name, distribution, version and code) and the model are its
    identity: changing any misses the judgment cache and needs a new validation before a rule on
    it may gate.
    """

    type_name = "judge"
    family = "judge"
    default_criterion = "judged"
    prompts: tuple[str, ...] = ("v1",)
    # prompt versions judging a conversation's whole transcript (``scope: conversation``), each
    # ``transcript-<version>``; a judge with none does not take that scope
    transcripts: tuple[str, ...] = ()
    scope = "turn"
    metric = "proportion"
    judge = True  # a gating rule on it needs a validation against human labels
    concurrent = True  # it waits on a service: the runner calls it from several threads

    def __init__(self, options: JudgeOptions):
        from oloproof_core.model.identity import digest

        self.options = options
        self.system, self.template = self.load_prompt(options.prompt)
        self.prompt_version = f"{self.family}/{options.prompt}"
        entry, self.provider = _open(options.provider, options.model, options.provider_options,
                                     what=f"evaluator {self.type_name!r}", registry=None)
        self.identity = {"prompt_version": self.prompt_version, "provider": options.provider, "model": options.model,
                         "prompt_sha256": digest([self.system, self.template.template]),
                         "provider_plugin": provider_code(entry, self.provider)}
        served = getattr(self.provider, "identity", None)  # what the options cannot show (a replies file)
        if served:
            self.identity["provider_identity"] = dict(served)

    def load_prompt(self, version: str) -> tuple[str, Any]:
        """The system text and the user template of a prompt version shipped with the judge."""
        from importlib.resources import files
        from string import Template

        if version not in self.prompts + self.transcripts:
            raise ConfigError(f"{self.type_name} has no prompt {version!r}", fix=f"use one of: {', '.join(self.prompts)}")
        folder = files(type(self).__module__) / "prompts"
        return ((folder / f"{version}.system.txt").read_text(encoding="utf-8"),
                Template((folder / f"{version}.user.txt").read_text(encoding="utf-8")))

    def for_conversation(self) -> LLMJudge:
        """This judge with ``scope: conversation``: judging once per conversation, on its last turn,
        the whole transcript, with its ``transcript-`` prompt (part of its identity)."""
        import copy

        from oloproof_core.model.identity import digest

        version = f"transcript-{self.options.prompt}"
        if version not in self.transcripts:
            raise ConfigError(f"{self.type_name} does not judge a whole conversation (scope: conversation)",
                              key="scope", fix="remove scope:, or use rubric_judge for a criterion over the transcript")
        judge = copy.copy(self)
        judge.scope, judge.prompt_version = "conversation", f"{self.family}/{version}"
        judge.system, judge.template = self.load_prompt(version)
        judge.identity = {**self.identity, "prompt_version": judge.prompt_version,
                          "prompt_sha256": digest([judge.system, judge.template.template])}
        return judge

    def transcript(self, case: Any, execution: Any) -> str:
        """A conversation as prompt text: each earlier turn of ``case.history``, then this one, as
        ``Turn K`` with the user's question and the assistant's answer (the judge's fields)."""
        turns = [*case.history, {"input": case.input, "output": execution.output}]
        lines = []
        for k, turn in enumerate(turns, 1):
            asked, said = select(turn["input"], self.options.question_field), select(turn["output"], self.options.answer_field)
            lines.append(f"Turn {k}\nUser: {text_of(turn['input'] if asked is None else asked)}\n"
                         f"Assistant: {text_of(turn['output'] if said is None else said)}")
        return "\n\n".join(lines)

    @property
    def criterion(self) -> str:
        return self.options.criterion or self.default_criterion

    def question(self, case: Any) -> str:
        found = select(case.input, self.options.question_field)
        return text_of(found if found is not None else case.input)

    def answer(self, execution: Any) -> Any:
        return select(execution.output, self.options.answer_field)

    @staticmethod
    def paid(reply: Any) -> dict:
        """A reply's usage, with ``calls: 1`` when the provider reports any (a judge of several calls adds them up)."""
        usage = dict(reply.usage or {})
        return {**usage, "calls": 1} if usage else usage

    def ask(self, detail: Mapping[str, Any] | None = None, **fields: str) -> Judgment:
        """Fill the prompt template with ``fields``, ask the model, read its verdict."""
        reply = self.provider.complete(self.template.substitute(**fields), system=self.system)
        return judgment_from_reply(reply, prompt_version=self.prompt_version, **dict(detail or {}))

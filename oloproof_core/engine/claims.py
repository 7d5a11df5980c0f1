"""Claim-level judges: a text is split into claims, and each claim is judged against the context.

Two LLM steps, each a versioned prompt of the judge's package: ``<version>.split.{system,user}.txt``
splits a text (the answer, or the reference answer) into short self-contained claims, replying
``{"claims": ["...", ...]}``; ``<version>.{system,user}.txt`` judges one claim against the
context passages, replying ``{"verdict": "pass" | "fail", "passage": "<id>" | null, "rationale":
"..."}`` (pass: the claim is supported, and ``passage`` names the passage that supports it). Every
split is cached per (text, judge identity) and every verdict per (claim, context, judge
identity) in the judgment cache, so a claim judged before against the same context is not asked
again. The judgment counts them: ``3 of 4 claims supported``. docs/judges.md.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from attrs import field, frozen

from oloproof_core.engine.providers import (FENCE, RAW_CHARS, JudgeOptions, LLMJudge, json_objects,
                                            parse_verdict)
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.identity import digest
from oloproof_core.model.records import Judgment
from oloproof_core.model.retrieval import latest, unit_key

MAX_CLAIMS = 40  # a split with more is cut (and says so): each claim is one more call
CLAIM_CHARS = 500


def _check_threshold(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1):
        raise ConfigError(f"threshold must be a number above 0 and at most 1, got {value!r}",
                          fix="write threshold: 1.0 to pass only when every claim is supported, or remove it for "
                              "the share of supported claims", key="threshold")


@frozen(kw_only=True)
class ClaimOptions(JudgeOptions):
    """The options of a claim-level judge: those of every judge, and ``threshold``: None (the
    default) makes the criterion the share of supported claims (the ``fraction`` metric: a case
    with every claim supported passes, one with none fails, others score their share); a number
    makes it pass/fail, passing when at least that share is supported."""

    threshold: float | None = field(default=None, validator=_check_threshold)


def parse_claims(text: str) -> list[str] | None:
    """The claims of a split reply (one JSON object ``{"claims": [strings]}``), else None."""
    found = json_objects(FENCE.sub("", text.strip()), "claims")
    if len(found) != 1 or not isinstance(found[0]["claims"], list):
        return None
    claims = found[0]["claims"]
    if not all(isinstance(c, str) for c in claims):
        return None
    return [" ".join(c.split())[:CLAIM_CHARS] for c in claims if c.strip()]


class ClaimJudge(LLMJudge, abc.ABC):
    """A judge that splits :meth:`claimed` (a subclass's: the text whose claims are judged) into
    claims and judges each against the last recorded ``context/v1``."""

    reads = ("context/v1",)
    claimed_words = "claims"  # how the claims are named in reasons (``claims of the answer``)

    def __init__(self, options: ClaimOptions):
        super().__init__(options)
        from importlib.resources import files
        from string import Template

        folder = files(type(self).__module__) / "prompts"
        self.split_system = (folder / f"{options.prompt}.split.system.txt").read_text(encoding="utf-8")
        self.split_template = Template((folder / f"{options.prompt}.split.user.txt").read_text(encoding="utf-8"))
        self.identity["split_prompt_sha256"] = digest([self.split_system, self.split_template.template])
        self.metric = "fraction" if options.threshold is None else "proportion"
        self.cache: Any = None  # the judgment cache, bound by the runner (bind_cache)
        self._identity = digest(self.identity)

    def bind_cache(self, cache: Any) -> None:
        """The runner gives the judgment cache: ``get(key)`` and ``put(key, value)``."""
        self.cache = cache

    @abc.abstractmethod
    def claimed(self, case: Any, execution: Any) -> str | Judgment:
        """The text whose claims are judged, or the judgment when there is none."""

    def no_claims(self) -> Judgment:
        """The judgment of a text that makes no claim."""
        return Judgment.passed("no_claims", claims=[], supported=0, total=0)

    def _asked(self, key: dict, parse: Any, prompt: str, system: str) -> dict:
        """``{value, usage, cached}`` from the cache or the model; ``{raw, usage}`` when unreadable."""
        key = digest({"judge": self._identity, **key})
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return {"value": hit, "usage": {}, "cached": True}
        reply = self.provider.complete(prompt, system=system)
        text = reply.text if isinstance(reply.text, str) else ""
        value = parse(text)
        usage = self.paid(reply)
        if value is None:
            return {"raw": text[:RAW_CHARS], "usage": usage}
        if self.cache is not None:
            self.cache.put(key, value)
        return {"value": value, "usage": usage, "cached": False}

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        context = latest(execution, "context/v1")
        if context is None:
            return Judgment.missing("no_context_recorded")
        items = list(context.get("items", ()))
        if items and not any(item.get("text") for item in items):
            return Judgment.missing("context_without_text")
        text = self.claimed(case, execution)
        if isinstance(text, Judgment):
            return text
        question, usage = self.question(case), {}

        def spent(asked: dict) -> None:
            for name, value in asked.get("usage", {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    usage[name] = usage.get(name, 0) + value

        split = self._asked({"split": text, "question": question}, parse_claims,
                            self.split_template.substitute(question=question, text=text), self.split_system)
        spent(split)
        if "raw" in split:
            return Judgment(status="missing", reason="judge_unparseable",
                            detail={"raw": split["raw"], "step": "split", "prompt_version": self.prompt_version,
                                    "usage": usage})
        claims = split["value"][:MAX_CLAIMS]
        if not claims:
            judgment = self.no_claims()
            return Judgment(status=judgment.status, value=judgment.value, reason=judgment.reason,
                            detail={**(judgment.detail or {}), "prompt_version": self.prompt_version, "usage": usage})
        ids = {unit_key(item, "chunk"): item for item in items}
        passages = "\n\n".join(f"[{name}] {item.get('text') or '(no text recorded)'}" for name, item in ids.items())
        judged, cached = [], int(split["cached"])
        for claim in claims:
            if not ids:  # nothing to support it: no model is asked
                judged.append({"claim": claim, "verdict": "unsupported", "passage": None,
                               "rationale": "the context holds no passage"})
                continue
            asked = self._asked({"claim": claim, "context": passages}, _claim_verdict,
                                self.template.substitute(question=question, context=passages, claim=claim), self.system)
            spent(asked)
            if "raw" in asked:
                return Judgment(status="missing", reason="judge_unparseable",
                                detail={"raw": asked["raw"], "step": "claim", "claim": claim,
                                        "prompt_version": self.prompt_version, "usage": usage})
            cached += asked["cached"]
            verdict = asked["value"]
            supported = verdict["verdict"] == "pass"
            passage = verdict.get("passage") if supported else None
            judged.append({"claim": claim, "verdict": "supported" if supported else "unsupported",
                           "passage": passage if passage in ids else None, "rationale": verdict["rationale"]})
        return self.judgment(judged, cached, usage, cut=len(split["value"]) > MAX_CLAIMS)

    def judgment(self, judged: list[dict], cached: int, usage: Mapping, cut: bool = False) -> Judgment:
        total = len(judged)
        supported = sum(1 for c in judged if c["verdict"] == "supported")
        share = supported / total
        summary = f"{supported} of {total} {self.claimed_words} supported"
        detail = {"summary": summary, "claims": judged, "supported": supported, "total": total, "fraction": share,
                  "cached_calls": cached, "prompt_version": self.prompt_version, "usage": dict(usage)}
        if cut:
            detail["claims_cut_at"] = MAX_CLAIMS
        threshold = self.options.threshold
        if threshold is None and 0 < share < 1:
            return Judgment(status="score", value=share, reason=summary, detail=detail)
        ok = share == 1 if threshold is None else share >= threshold
        return Judgment.of(ok, None if share == 1 else summary, **detail)


def _claim_verdict(text: str) -> dict | None:
    """``{verdict, passage, rationale}`` of a claim reply, else None."""
    parsed = parse_verdict(text)
    if parsed is None:
        return None
    found = json_objects(FENCE.sub("", text.strip()), "verdict")
    passage = found[0].get("passage")
    passage = passage.strip().strip("[]") if isinstance(passage, str) and passage.strip() else None
    return {"verdict": parsed[0], "passage": passage, "rationale": parsed[1]}

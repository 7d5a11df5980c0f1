"""The ``llm_generator`` case generator: a provider's model writes each question and its reference
answer from the source passages, then judges whether the passages support the answer.

One prompt a question kind (``factoid``, ``two_passage``, ``paraphrased``, ``unanswerable``) and
one for the support check, versioned files of this package (``prompts/v1.*.txt``); the prompt
version and texts, the provider (its distribution, version and code, and a replies file's sha256)
and the model are the generator's identity, which every case's ``metadata.synthetic`` records.
The model answers with one JSON object, ``{"question": ..., "answer": ...}`` (the check: ``{"verdict":
"pass" | "fail", "rationale": ...}``); anything else drops the request as an unusable reply.
docs/suite-without-labels.md.
"""

from __future__ import annotations

from string import Template
from typing import Any

from attrs import field, frozen

from oloproof import ConfigError, EvaluationError, digest, hookimpl, identified_provider, json_objects

KINDS = ("factoid", "two_passage", "paraphrased", "unanswerable")
PROMPTS = ("v1",)  # every version ever shipped stays
ANSWER_TOKENS, CHECK_TOKENS = 80, 40  # what a reply is assumed to cost, for the estimate


@frozen(kw_only=True)
class Options:
    provider: str  # a registered provider: openai, anthropic, replay, or a plugin's
    model: str
    provider_options: dict[str, Any] = field(factory=dict)
    prompt: str = "v1"
    check: bool = True  # judge every answer against its passages and drop the unsupported


class LLMGenerator:
    """Questions and reference answers from a model, each checked against its passages."""

    kinds = KINDS

    def __init__(self, options: Options):
        from importlib.resources import files

        if options.prompt not in PROMPTS:
            raise ConfigError(f"llm_generator has no prompt {options.prompt!r}", fix=f"use one of: {', '.join(PROMPTS)}")
        folder = files(__name__) / "prompts"
        read = lambda name: (folder / f"{options.prompt}.{name}.txt").read_text(encoding="utf-8")  # noqa: E731  # a local shorthand
        self.options = options
        self.system = read("system")
        self.templates = {name: Template(read(name)) for name in (*KINDS, "check")}
        self.provider, served = identified_provider(options.provider, options.model, options.provider_options,
                                                    what="generator 'llm_generator'")
        self.prompt_version = f"generation/{options.prompt}"
        self.identity = {"prompt_version": self.prompt_version, "check": options.check,
                         "prompt_sha256": digest([self.system, *(t.template for t in self.templates.values())]),
                         **served}
        prices = options.provider_options
        self.prices = (prices.get("price_per_million_input_tokens"), prices.get("price_per_million_output_tokens"))

    @staticmethod
    def shown(passages: list[dict]) -> str:
        return "\n\n".join(f"[{p['doc_id']}{'#' + p['chunk_id'] if p.get('chunk_id') else ''}]\n{p['text']}"
                           for p in passages)

    def prompt(self, request: dict) -> str:
        return self.templates[request["kind"]].substitute(passages=self.shown(request["passages"]), kind=request["kind"])

    def check_prompt(self, request: dict, item: dict) -> str:
        return self.templates["check"].substitute(passages=self.shown(request["passages"]), **item)

    def estimate(self, request: dict) -> dict:
        """Tokens as characters / 4 (a rough rule), replies at their assumed length."""
        asked = [(self.prompt(request), ANSWER_TOKENS)]
        if self.options.check and request["kind"] != "unanswerable":
            asked.append((self.check_prompt(request, {"question": "x" * 60, "answer": "x" * 120}), CHECK_TOKENS))
        tokens_in = sum((len(self.system) + len(text)) // 4 for text, _ in asked)
        tokens_out = sum(out for _, out in asked)
        cost = (None if None in self.prices
                else (tokens_in * self.prices[0] + tokens_out * self.prices[1]) / 1e6)
        return {"calls": len(asked), "input_tokens": tokens_in, "output_tokens": tokens_out, "cost": cost}

    def generate(self, request: dict) -> dict:
        reply = self.provider.complete(self.prompt(request), system=self.system)
        found = [v for v in json_objects(reply.text or "", "question")
                 if isinstance(v.get("question"), str) and isinstance(v.get("answer", ""), str)]
        if not found:
            raise EvaluationError(f"unusable reply: {(reply.text or '')[:120]!r}")
        return {"question": found[0]["question"], "answer": found[0].get("answer", ""), "usage": dict(reply.usage or {})}

    def check(self, request: dict, item: dict) -> dict:
        if not self.options.check:
            return {"supported": True, "rationale": "not checked", "usage": {}}
        reply = self.provider.complete(self.check_prompt(request, item), system=self.system)
        verdicts = [v for v in json_objects(reply.text or "", "verdict") if v.get("verdict") in ("pass", "fail")]
        if len(verdicts) != 1:
            raise EvaluationError(f"unusable check reply: {(reply.text or '')[:120]!r}")
        return {"supported": verdicts[0]["verdict"] == "pass", "rationale": str(verdicts[0].get("rationale", "")),
                "usage": dict(reply.usage or {})}


@hookimpl
def oloproof_register_generators(registry):
    registry.add("llm_generator", LLMGenerator, options=Options)

"""The ``groundedness_judge`` evaluator: an LLM judges whether every claim of the answer is
supported by the context given to the model (the last recorded ``context/v1``).

The prompt is a versioned pair of files of this package (``prompts/v1.system.txt``,
``prompts/v1.user.txt``). The prompt version and text, the provider and the model are the judge's
identity: changing any of them misses the judgment cache and needs a new validation before the
criterion may gate. docs/judges.md.
"""

from __future__ import annotations

import json
from string import Template
from typing import Any

from attrs import field, frozen

from oloproof import (
    ConfigError,
    Judgment,
    digest,
    hookimpl,
    judgment_from_reply,
    latest,
    open_provider,
    select,
)

NAME = "groundedness_judge"
PROMPTS = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned


@frozen(kw_only=True)
class Options:
    provider: str  # a registered provider: openai, anthropic, or a plugin's
    model: str
    provider_options: dict[str, Any] = field(factory=dict)  # base_url, api_key_env, prices, timeout, ...
    criterion: str | None = None  # None: grounded
    prompt: str = "v1"
    question_field: str | None = "question"  # a key of the case input; None: the whole input
    answer_field: str | None = "answer"  # a key of the output; None: the whole output


def load_prompt(version: str) -> tuple[str, Template]:
    """The system text and the user template of a prompt version shipped with this package."""
    from importlib.resources import files

    if version not in PROMPTS:
        raise ConfigError(f"{NAME} has no prompt {version!r}", fix=f"use one of: {', '.join(PROMPTS)}")
    folder = files(__package__) / "prompts"
    return ((folder / f"{version}.system.txt").read_text(encoding="utf-8"),
            Template((folder / f"{version}.user.txt").read_text(encoding="utf-8")))


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def passage_name(item: dict) -> str:
    return f"{item['doc_id']}#{item['chunk_id']}" if item.get("chunk_id") is not None else str(item["doc_id"])


class GroundednessJudge:
    """Pass when the judge finds every claim of the answer in the passages given to the model."""

    metric = "proportion"
    judge = True  # a gating rule on it needs a validation against human labels
    concurrent = True  # it waits on a service: the runner calls it from several threads
    reads = ("context/v1",)

    def __init__(self, options: Options):
        self.options, self.verdict = options, judgment_from_reply
        self.system, self.template = load_prompt(options.prompt)
        self.prompt_version = f"groundedness/{options.prompt}"
        self.provider = open_provider(options.provider, options.model, options.provider_options,
                                      what=f"evaluator {NAME!r}")
        self.identity = {"prompt_version": self.prompt_version, "provider": options.provider, "model": options.model,
                         "prompt_sha256": digest([self.system, self.template.template])}

    @property
    def criterion(self) -> str:
        return self.options.criterion or "grounded"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        context = latest(execution, "context/v1")
        if context is None:
            return Judgment.missing("no_context_recorded")
        answer = select(execution.output, self.options.answer_field)
        if answer is None:
            return Judgment.failed("field_absent")
        items = list(context.get("items", ()))
        if items and not any(item.get("text") for item in items):
            return Judgment.missing("context_without_text")
        passages = "\n\n".join(f"[{i}] ({passage_name(item)}) {item.get('text') or '(no text recorded)'}"
                               for i, item in enumerate(items, 1))
        question = select(case.input, self.options.question_field)
        prompt = self.template.substitute(question=text_of(question if question is not None else case.input),
                                          context=passages or "(no passages)", answer=text_of(answer))
        reply = self.provider.complete(prompt, system=self.system)
        return self.verdict(reply, prompt_version=self.prompt_version)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add(NAME, GroundednessJudge, options=Options)

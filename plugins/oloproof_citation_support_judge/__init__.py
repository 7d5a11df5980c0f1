"""The ``citation_support_judge`` evaluator: an LLM judges whether each passage the answer cites
(the last recorded ``citations/v1``) supports the statement that cites it, reading the passages'
text from the context given to the model (the last ``context/v1``).

An answer that cites nothing is excluded (``citation_validity`` with ``require_citations: true``
fails it); a cited id that names no passage of the context fails without asking the judge
(``cites_outside_context``). Ids match as in ``citation_validity``: ``doc_id``,
``doc_id#chunk_id`` or ``chunk_id``. The prompt is a versioned pair of files of this package; its
version and text, the provider and the model are the judge's identity. docs/judges.md.
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

NAME = "citation_support_judge"
PROMPTS = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned


@frozen(kw_only=True)
class Options:
    provider: str  # a registered provider: openai, anthropic, or a plugin's
    model: str
    provider_options: dict[str, Any] = field(factory=dict)  # base_url, api_key_env, prices, timeout, ...
    criterion: str | None = None  # None: citations_supported
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


def passages_by_name(context: dict) -> dict[str, dict]:
    """Every id by which a citation may name an item of the context, and that item."""
    names: dict[str, dict] = {}
    for item in context.get("items", ()):
        names.setdefault(str(item["doc_id"]), item)
        if item.get("chunk_id") is not None:
            names.setdefault(f"{item['doc_id']}#{item['chunk_id']}", item)
            names.setdefault(str(item["chunk_id"]), item)
    return names


class CitationSupportJudge:
    """Pass when the judge finds each cited passage supports the statement citing it."""

    metric = "proportion"
    judge = True  # a gating rule on it needs a validation against human labels
    concurrent = True  # it waits on a service: the runner calls it from several threads
    reads = ("citations/v1", "context/v1")

    def __init__(self, options: Options):
        self.options, self.verdict = options, judgment_from_reply
        self.system, self.template = load_prompt(options.prompt)
        self.prompt_version = f"citation_support/{options.prompt}"
        self.provider = open_provider(options.provider, options.model, options.provider_options,
                                      what=f"evaluator {NAME!r}")
        self.identity = {"prompt_version": self.prompt_version, "provider": options.provider, "model": options.model,
                         "prompt_sha256": digest([self.system, self.template.template])}

    @property
    def criterion(self) -> str:
        return self.options.criterion or "citations_supported"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        citations = latest(execution, "citations/v1")
        if citations is None:
            return Judgment.missing("no_citations_recorded")
        context = latest(execution, "context/v1")
        if context is None:
            return Judgment.missing("no_context_recorded")
        cited = list(dict.fromkeys(citations.get("ids", ())))
        if not cited:
            return Judgment.excluded("no_citations")
        names = passages_by_name(context)
        outside = [cited_id for cited_id in cited if cited_id not in names]
        if outside:
            return Judgment.failed("cites_outside_context", invalid=outside)
        if not all(names[cited_id].get("text") for cited_id in cited):
            return Judgment.missing("context_without_text")
        answer = select(execution.output, self.options.answer_field)
        if answer is None:
            return Judgment.failed("field_absent")
        question = select(case.input, self.options.question_field)
        shown = "\n\n".join(f"[{cited_id}] {names[cited_id]['text']}" for cited_id in cited)
        prompt = self.template.substitute(question=text_of(question if question is not None else case.input),
                                          answer=text_of(answer), cited=shown)
        reply = self.provider.complete(prompt, system=self.system)
        return self.verdict(reply, prompt_version=self.prompt_version, cited=cited)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add(NAME, CitationSupportJudge, options=Options)

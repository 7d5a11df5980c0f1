"""The ``exact_judge`` evaluator: an LLM judges whether the answer means the same as the case's
expected answer (``expected.answer``), for answers whose wording varies.

Cases that declare no expected answer are excluded. The prompt is a versioned pair of files of
this package; its version and text, the provider and the model are the judge's identity, so
changing any of them misses the judgment cache and needs a new validation. docs/judges.md.
"""

from __future__ import annotations

import json
from string import Template
from typing import Any

from attrs import field, frozen

from oloproof import ConfigError, Judgment, digest, hookimpl, judgment_from_reply, open_provider, select

NAME = "exact_judge"
PROMPTS = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned


@frozen(kw_only=True)
class Options:
    provider: str  # a registered provider: openai, anthropic, or a plugin's
    model: str
    provider_options: dict[str, Any] = field(factory=dict)  # base_url, api_key_env, prices, timeout, ...
    criterion: str | None = None  # None: answer_equivalent
    prompt: str = "v1"
    question_field: str | None = "question"  # a key of the case input; None: the whole input
    answer_field: str | None = "answer"  # a key of the output; None: the whole output
    expected_field: str = "answer"  # a key of the case's expected


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


class ExactJudge:
    """Pass when the judge finds the answer equivalent to the expected answer."""

    metric = "proportion"
    judge = True  # a gating rule on it needs a validation against human labels
    concurrent = True  # it waits on a service: the runner calls it from several threads

    def __init__(self, options: Options):
        self.options, self.verdict = options, judgment_from_reply
        self.system, self.template = load_prompt(options.prompt)
        self.prompt_version = f"exact/{options.prompt}"
        self.provider = open_provider(options.provider, options.model, options.provider_options,
                                      what=f"evaluator {NAME!r}")
        self.identity = {"prompt_version": self.prompt_version, "provider": options.provider, "model": options.model,
                         "prompt_sha256": digest([self.system, self.template.template])}

    @property
    def criterion(self) -> str:
        return self.options.criterion or "answer_equivalent"

    def exclude(self, case: Any) -> str | None:
        """Cases that declare no expected answer are outside this criterion."""
        return None if select(case.expected, self.options.expected_field) is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        answer = select(execution.output, self.options.answer_field)
        if answer is None:
            return Judgment.failed("field_absent")
        question = select(case.input, self.options.question_field)
        prompt = self.template.substitute(question=text_of(question if question is not None else case.input),
                                          expected=text_of(select(case.expected, self.options.expected_field)),
                                          answer=text_of(answer))
        reply = self.provider.complete(prompt, system=self.system)
        return self.verdict(reply, prompt_version=self.prompt_version)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add(NAME, ExactJudge, options=Options)

"""The ``rubric_judge`` evaluator: an LLM judges whether the answer satisfies a rubric written in
the suite (``rubric: "The answer tells the customer how long a refund takes."``).

With ``expected_field`` set, the case's expected value at that key is shown to the judge as a
reference answer, and cases without it are excluded. The prompt is a versioned pair of files of
this package; its version and text, the provider and the model are the judge's identity, and the
rubric is one of its options, so editing the rubric misses the cache too. docs/judges.md.
"""

from __future__ import annotations

import json
from string import Template
from typing import Any

from attrs import field, frozen

from oloproof import ConfigError, Judgment, digest, hookimpl, judgment_from_reply, open_provider, select

NAME = "rubric_judge"
PROMPTS = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned


@frozen(kw_only=True)
class Options:
    criterion: str
    rubric: str  # what a passing answer does, in plain words
    provider: str  # a registered provider: openai, anthropic, or a plugin's
    model: str
    provider_options: dict[str, Any] = field(factory=dict)  # base_url, api_key_env, prices, timeout, ...
    prompt: str = "v1"
    question_field: str | None = "question"  # a key of the case input; None: the whole input
    answer_field: str | None = "answer"  # a key of the output; None: the whole output
    expected_field: str | None = None  # a key of the case's expected: shown as a reference answer


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


class RubricJudge:
    """Pass when the judge finds the answer satisfies the suite's rubric."""

    metric = "proportion"
    judge = True  # a gating rule on it needs a validation against human labels
    concurrent = True  # it waits on a service: the runner calls it from several threads

    def __init__(self, options: Options):
        if not options.rubric.strip():
            raise ConfigError(f"evaluator {NAME!r} has an empty rubric", fix="write what a passing answer does")
        self.options, self.verdict = options, judgment_from_reply
        self.system, self.template = load_prompt(options.prompt)
        self.prompt_version = f"rubric/{options.prompt}"
        self.provider = open_provider(options.provider, options.model, options.provider_options,
                                      what=f"evaluator {NAME!r}")
        self.identity = {"prompt_version": self.prompt_version, "provider": options.provider, "model": options.model,
                         "prompt_sha256": digest([self.system, self.template.template])}

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def exclude(self, case: Any) -> str | None:
        """With a reference answer asked for, cases that declare none are outside this criterion."""
        if self.options.expected_field is None or select(case.expected, self.options.expected_field) is not None:
            return None
        return "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        answer = select(execution.output, self.options.answer_field)
        if answer is None:
            return Judgment.failed("field_absent")
        question = select(case.input, self.options.question_field)
        reference = ""
        if self.options.expected_field is not None:
            reference = f"\nReference answer:\n{text_of(select(case.expected, self.options.expected_field))}\n"
        prompt = self.template.substitute(rubric=self.options.rubric.strip(), answer=text_of(answer),
                                          question=text_of(question if question is not None else case.input),
                                          reference=reference)
        reply = self.provider.complete(prompt, system=self.system)
        return self.verdict(reply, prompt_version=self.prompt_version)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add(NAME, RubricJudge, options=Options)

"""The gate: a written policy's rules decided on a run's metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import field, frozen

from oloproof_core.config.documents import INTERNAL, Document, structure
from oloproof_core.model.errors import ConfigError, ExitCode
from oloproof_core.decisions.threshold import Decision, Rule, decide_threshold
from oloproof_core.model.records import Judgment, Metric

VERDICTS = ("PASS", "FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW")
RUN_RULE_KINDS = ("interval", "observed_count")


@frozen(kw_only=True)
class JudgeValidation:
    """What a judge's validation against human labels must show before its metric may gate."""

    min_kappa: float = 0.6
    min_cases: int = 30
    # "kappa": the lower bound of kappa; "bias": the bias and false-pass bounds (statistics/admission.py)
    admit_by: str = "kappa"
    max_bias: float = 0.10
    max_false_pass: float = 0.5


@frozen(kw_only=True)
class SequentialOptions:
    """``sequential:`` run the cases in a seeded random order, ``batch`` at a time, and stop as soon
    as the gate is decided (``oloproof run --until-decided`` turns it on from the command line)."""

    until_decided: bool = False
    batch: int = 10
    seed: int = 0
    interval: str = "betting"  # or adaptive-betting, beta-binomial, group-sequential (docs/statistics.md)


@frozen(kw_only=True)
class Policy:
    """A gate policy: which verdicts block, at which confidence level, and the rules."""

    version: int
    confidence_level: float = 0.95
    block_on: list[str] = field(factory=lambda: ["FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW"])
    rules: list[Rule] = field(factory=list)
    judge_validation: JudgeValidation = field(factory=JudgeValidation)
    sequential: SequentialOptions = field(factory=SequentialOptions)
    # criterion -> a human labels file (as `judge validate` reads), for the human-level interval
    labels: dict[str, str] = field(factory=dict)
    # rule id -> "file:line:col: $.rules[i]", filled in by load_policy; not a key of the policy file
    where: dict = field(factory=dict, eq=False, metadata={INTERNAL: True})

    def check_metrics(self, metrics: Mapping[str, Any], kinds: Sequence[str] = RUN_RULE_KINDS) -> None:
        """Every rule names a criterion of the suite and a kind this command decides; every labels
        file is for a criterion of the suite."""
        for criterion in self.labels:
            if criterion not in metrics:
                raise ConfigError(f"labels: names criterion {criterion!r}, which no evaluator defines",
                                  fix=f"use one of: {', '.join(metrics)}")
        for rule in self.rules:
            if rule.metric not in metrics:
                raise ConfigError(f"rule {rule.id!r} names metric {rule.metric!r}, which no evaluator defines",
                                  where=self.where.get(rule.id),
                                  fix=f"use one of: {', '.join(metrics)}")
            if rule.kind not in kinds:
                raise ConfigError(f"rule {rule.id!r} has kind {rule.kind!r}, which this command does not decide",
                                  where=self.where.get(rule.id), fix=f"use one of: {', '.join(kinds)}")
            if rule.kind == "observed_count" and not getattr(metrics[rule.metric], "pass_fail", False):
                # a score criterion records no failures, so the count would PASS whatever the scores
                raise ConfigError(f"rule {rule.id!r} counts failures of {rule.metric!r}, which is not a pass/fail "
                                  f"criterion (its metric is {getattr(metrics[rule.metric], 'name', '?')!r})",
                                  where=self.where.get(rule.id),
                                  fix=f"use an interval rule (`min: 0.8`) on {rule.metric}, or count failures of a "
                                      "pass/fail criterion")


def load_policy(doc: Document, value: Any, project_dir: Path, path: tuple) -> Policy:
    """A policy inline (a mapping) or in a file (a path relative to the project)."""
    if isinstance(value, str):
        doc = Document.load(project_dir / value, fix=f"create it, or fix the `policy:` path in {doc.path.name}")
        value, path = doc.data, ()
    if not isinstance(value, dict):
        raise ConfigError("expected a policy file name or a mapping", where=doc.where(path),
                          fix="write `policy: policy.yaml` or an inline mapping with version and rules")
    policy = structure(doc, value, Policy, path, what="a policy")
    where = {}
    for i, rule in enumerate(policy.rules):
        at = path + ("rules", i)
        if rule.id in where:
            raise ConfigError(f"rule id {rule.id!r} is used twice", where=doc.where(at), fix="give each rule its own id")
        where[rule.id] = doc.where(at)
        if rule.kind == "interval" and rule.min is None and rule.max is None:
            raise ConfigError(f"rule {rule.id!r} has neither min nor max", where=doc.where(at),
                              fix="add `min: 0.7` (or max), or `kind: observed_count` with max_failures")
        if rule.kind == "observed_count" and rule.max_failures is None:
            raise ConfigError(f"rule {rule.id!r} of kind observed_count needs max_failures",
                              where=doc.where(at), fix="add `max_failures: 0`")
        if rule.max_failures is not None and rule.max_failures < 0:
            raise ConfigError(f"max_failures must be at least 0, got {rule.max_failures}",
                              where=doc.where(at + ("max_failures",)), fix="write max_failures: 0")
        for bound in ("min", "max"):
            value_ = getattr(rule, bound)
            if value_ is not None and not 0.0 <= value_ <= 1.0 and rule.kind == "interval":
                raise ConfigError(f"{bound} must be a fraction between 0 and 1, got {value_}",
                                  where=doc.where(at + (bound,)), fix=f"write {bound}: 0.70 for 70%")
    if not 0.0 < policy.confidence_level < 1.0:
        raise ConfigError(f"confidence_level must be between 0 and 1, got {policy.confidence_level}",
                          where=doc.where(path + ("confidence_level",)), fix="write confidence_level: 0.95")
    for i, verdict in enumerate(policy.block_on):
        if verdict not in VERDICTS:
            raise ConfigError(f"unknown verdict {verdict!r}", where=doc.where(path + ("block_on", i)),
                              fix=f"use any of: {', '.join(VERDICTS)}")
    if policy.sequential.interval not in ("betting", "adaptive-betting", "beta-binomial", "group-sequential"):
        raise ConfigError(f"unknown sequential interval {policy.sequential.interval!r}",
                          where=doc.where(path + ("sequential", "interval")),
                          fix="use betting (the default), adaptive-betting, beta-binomial or group-sequential")
    if policy.sequential.batch < 1:
        raise ConfigError(f"sequential.batch must be at least 1 case, got {policy.sequential.batch}",
                          where=doc.where(path + ("sequential", "batch")), fix="write batch: 10")
    for criterion, name in policy.labels.items():
        if not (project_dir / name).is_file():
            raise ConfigError(f"labels file {name!r} of {criterion!r} not found",
                              where=doc.where(path + ("labels", criterion)),
                              fix="write the labels file (docs/judges.md#the-labels-file), or fix the path: it is "
                                  "relative to the project")
    if policy.judge_validation.admit_by not in ("kappa", "bias"):
        raise ConfigError(f"unknown judge_validation.admit_by {policy.judge_validation.admit_by!r}",
                          where=doc.where(path + ("judge_validation", "admit_by")),
                          fix="use kappa (the default) or bias")
    if policy.version != 1:
        raise ConfigError(f"unsupported policy version {policy.version}", where=doc.where(path + ("version",)),
                          fix="write version: 1")
    return Policy(version=policy.version, confidence_level=policy.confidence_level, block_on=policy.block_on,
                  rules=policy.rules, judge_validation=policy.judge_validation, sequential=policy.sequential,
                  labels=policy.labels, where=where)


def decide_rule(rule: Rule, judgments: Sequence[Judgment], metric: Metric, confidence: float) -> Decision:
    """One rule on one criterion's units: :func:`~oloproof_core.decisions.threshold.decide_threshold`,
    the decision compare's floor makes too."""
    return decide_threshold(rule, judgments, metric, confidence)


def decide_policy(policy: Policy, judgments: Mapping[str, Sequence[Judgment]], metrics: Mapping[str, Metric],
                  confidence: float, judges: Mapping[str, str], store: Any, not_run: int = 0,
                  human: Mapping[str, Metric] | None = None) -> list[Decision]:
    """Every rule of ``policy`` on the judgments of the cases run, then the judge-validation check.

    :param judges: criterion -> the judge's identity digest, for the criteria an LLM judges.
    :param not_run: cases of the suite a sequential run has not run; an observed_count rule counts
        them as possible failures (it is about the whole suite), an interval rule leaves them out.
    :param human: judge criterion -> its human-level metric (``statistics/human_level.py``), for the
        criteria with human labels on this run: an interval rule on one decides, through the same
        :func:`decide_threshold`, on the human-level interval instead of the judge's rate, and needs
        no validation (the interval holds whatever the judge's agreement).
    """
    human = human or {}
    decisions, on_human = [], set()
    for rule in policy.rules:
        cases = judgments[rule.metric]
        if rule.kind == "observed_count" and not_run:
            cases = [*cases, *[Judgment.missing("not_run")] * not_run]
        metric = metrics[rule.metric]
        if rule.metric in human and rule.kind == "interval":
            metric = human[rule.metric]
            on_human.add(rule.id)
        decisions.append(decide_threshold(rule, cases, metric, confidence))
    if judges:
        decisions = require_validated_judges(decisions, judges, store, policy.judge_validation, on_human)
    return decisions


def gate(decisions: Sequence[Decision], block_on: Sequence[str]) -> tuple[str, ExitCode]:
    """``("PASS", 0)``, or ``("BLOCK", 1)`` when a blocking rule FAILed, else ``("BLOCK", 3)``."""
    blocking = [d for d in decisions if d.verdict in block_on]
    if not blocking:
        return "PASS", ExitCode.OK
    if any(d.verdict == "FAIL" for d in blocking):
        return "BLOCK", ExitCode.FAIL
    return "BLOCK", ExitCode.BLOCKED


def requirement_met(record: Mapping[str, Any], requirement: JudgeValidation) -> bool:
    """Whether a stored validation compared at least ``min_cases`` cases and, by ``admit_by``, the lower
    bound of its kappa interval (not the point estimate) is at least ``min_kappa`` ("kappa"), or its
    bias interval lies within ±``max_bias`` and its false-pass rate's upper bound is at most
    ``max_false_pass`` ("bias", ``statistics/admission.py``).

    A record without ``kappa_bounds`` (made before the requirement read the bound) does not meet
    it: validate again, which costs nothing for verdicts already in the judgment cache.
    """
    if record.get("n", 0) < requirement.min_cases:
        return False
    if requirement.admit_by == "bias":
        from oloproof_core.statistics.admission import admit_by_bias

        t = record["table"]
        return admit_by_bias(t["judge_pass_human_pass"], t["judge_pass_human_fail"], t["judge_fail_human_pass"],
                             t["judge_fail_human_fail"], record.get("confidence_level", 0.95), requirement.max_bias,
                             requirement.max_false_pass)["met"]
    bounds = record.get("kappa_bounds")
    return bounds is not None and bounds[0] >= requirement.min_kappa


def judge_validated(store: Any, identity: str, requirement: JudgeValidation) -> bool:
    """Whether the latest stored validation of exactly this judge identity meets the policy's
    requirement (a later failing validation withdraws an earlier passing one)."""
    latest = None
    for _, record in store.list_objects("judge_validation"):
        if record.get("identity") == identity:
            latest = record
    return latest is not None and requirement_met(latest, requirement)


def require_validated_judges(decisions: list[Decision], judges: Mapping[str, str], store: Any,
                             requirement: JudgeValidation, on_human: set[str] = frozenset()) -> list[Decision]:
    """A rule on a judge criterion gates only once that exact judge passed a validation against
    human labels; until then its verdict is MANUAL_REVIEW (``judge_not_validated``).

    :param judges: criterion -> the judge's identity digest, for the criteria an LLM judges.
    :param on_human: the rules decided on the human-level interval, which need no validation.
    """
    out = []
    for d in decisions:
        if d.metric in judges and d.rule not in on_human and not judge_validated(store, judges[d.metric], requirement):
            d = Decision(rule=d.rule, metric=d.metric, verdict="MANUAL_REVIEW", reason="judge_not_validated")
        out.append(d)
    return out


def policy_data(policy: Policy | None) -> dict | None:
    """A policy as plain data, as runs and comparisons record it."""
    if policy is None:
        return None
    from oloproof_core.config.documents import CONVERTER

    data = CONVERTER.unstructure(policy)
    data.pop("where", None)
    if policy.sequential == SequentialOptions():  # unset: recorded as before, so content ids do not move
        data.pop("sequential", None)
    if not policy.labels:
        data.pop("labels", None)
    for key, default in (("admit_by", "kappa"), ("max_bias", 0.10), ("max_false_pass", 0.5)):
        if data["judge_validation"].get(key) == default:  # unset: recorded as before
            data["judge_validation"].pop(key)
    return data

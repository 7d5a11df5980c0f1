"""Anytime-valid runs: cases in a seeded random order, batch by batch, until the gate is decided.

``oloproof run --until-decided`` (or ``sequential: {until_decided: true}`` in the policy) executes
and judges the suite's cases in an order drawn from ``seed``, ``batch`` cases at a time. After each
batch every rule is decided on the cases run so far, and the run stops as soon as the gate cannot
change: no rule is INSUFFICIENT_EVIDENCE, or a rule FAILed and FAIL blocks.

Looking after every batch and stopping on what one sees would break an ordinary interval's level.
The betting interval does not: for each candidate mean its capital is a nonnegative martingale, so
by Ville's inequality it stays below 2/α at *every* sample size with probability 1 - α/2
(Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by betting", JRSS-B
86(1):1-27; Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic
confidence sequences", Annals of Statistics 49(2):1055-1080). So in this mode every metric, pass/fail
ones included, is summarised and decided with a confidence sequence valid under optional stopping:
the betting interval by default, or the one ``sequential.interval`` names (``adaptive-betting``,
statistics/adaptive.py; ``beta-binomial`` and ``group-sequential``, statistics/sequences.py). A
case order drawn at random makes the cases run so far a random sample of the suite's. An
``observed_count`` rule counts the failures of the whole suite, so the cases not run count as
possible failures: it can FAIL early, and PASS only once every case has run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from attrs import frozen

from oloproof_core.decisions.threshold import run_metrics
from oloproof_core.statistics.anytime import METHODS
from oloproof_core.statistics.anytime import AnytimeMetric as AnytimeMetric  # where it was, for its importers
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import Execution


@frozen(kw_only=True)
class Step:
    """What a sequential run executed: the suite indices of the cases run, in the order they ran,
    their executions and judgments, whether it was interrupted, the anytime metrics and the record."""

    indices: list[int]
    executions: list[Execution | None]
    judgments: list[dict]
    interrupted: bool
    metrics: dict
    record: dict


def gate_settled(decisions: Sequence[Any], block_on: Sequence[str]) -> bool:
    """Whether more cases could not change the gate: no rule undecided, or a blocking FAIL."""
    if "FAIL" in block_on and any(d.verdict == "FAIL" for d in decisions):
        return True
    return not any(d.verdict == "INSUFFICIENT_EVIDENCE" for d in decisions)


@frozen(kw_only=True)
class Sequential:
    """The settings of a sequential run: the seed of the case order and the batch size."""

    seed: int = 0
    batch: int = 10
    interval: str = "betting"

    def earlier(self, store: Any, header: dict, policy: Any, total: int) -> tuple[str, list[dict]]:
        """This run's :func:`series` and the earlier runs of it in another order (:func:`earlier_orders`)."""
        key = series(header, policy, total)
        return key, earlier_orders(store, key, self.seed)

    def warning(self, earlier: Sequence[dict]) -> str:
        return reordering_warning(earlier, self.seed)

    def order(self, total: int) -> list[int]:
        """The suite indices in the order they run: a permutation drawn from ``seed``."""
        import numpy as np

        return [int(i) for i in np.random.default_rng(self.seed).permutation(total)]

    def run(self, suite: Any, plugins: Any, store: Any, caches: dict, use_cache: bool,
            decide: Any, run_id: str | None = None, progress: Any = None) -> Step:
        """Execute and judge batch by batch until ``decide(judgments_of, not_run)`` settles the gate.

        :param decide: (criterion -> judgments of the cases run, cases not run) -> decisions, with
            the anytime metrics; the runner's own decision function.
        """
        from oloproof_core.engine.execution import execute_cases
        from oloproof_core.engine.judging import judge_cases
        from oloproof_core.engine.runner import merge_figures

        # as compare's floor rebuilds them from the run's record (decisions/threshold.py)
        metrics = run_metrics(suite.metrics, None, {"interval": self.interval, "cases_total": len(suite.cases),
                                                    "batch": self.batch})
        order, done, executions, judgments = self.order(len(suite.cases)), [], [], []
        looks, interrupted, decisions = 0, False, []
        caches.update({"execution": [0, 0], "judgment": [0, 0]})
        for start in range(0, len(order), self.batch):
            batch = order[start:start + self.batch]
            part = attrs.evolve(suite, cases=tuple(suite.cases[i] for i in batch))
            figures: dict = {}
            batch_executions, interrupted = execute_cases(part, plugins, store, figures, use_cache, run_id, progress)
            batch_judgments, stopped = judge_cases(part, store, batch_executions, figures, use_cache, progress)
            interrupted = interrupted or stopped
            merge_figures(caches, figures)
            done += batch
            executions += batch_executions
            judgments += batch_judgments
            looks += 1
            if interrupted:
                break
            by_criterion = {name: [j[name] for j in judgments] for name in metrics}
            decisions = decide(by_criterion, metrics, len(order) - len(done))
            if gate_settled(decisions, suite.policy.block_on):
                break
        not_run = [suite.cases[i] for i in order[len(done):]]
        record = {"seed": self.seed, "batch": self.batch, "looks": looks, "cases_run": len(done),
                  "cases_total": len(order), "cases_not_run": len(not_run),
                  "judge_calls_not_made": judge_calls(suite, not_run), "interval": self.interval,
                  "method": METHODS[self.interval],
                  "stopped": "gate_decided" if len(done) < len(order) and not interrupted else
                             ("interrupted" if interrupted else "all_cases_run")}
        # in the order they ran: the adaptive interval reads them in that order, at every look and at the end
        return Step(indices=done, executions=executions, judgments=judgments, interrupted=interrupted,
                    metrics=metrics, record=record)


def judge_calls(suite: Any, cases: Sequence[Any]) -> int:
    """The LLM-judge requests the cases not run would have needed at most (some may be cached)."""
    count = 0
    for spec in suite.evaluators:
        if getattr(spec.evaluator, "judge", False) is not True:
            continue
        exclude = getattr(spec.evaluator, "exclude", None)
        count += sum(1 for case in cases if exclude is None or exclude(case) is None)
    return count


def plan(suite: Any, until_decided: bool, seed: int | None, batch: int | None) -> Sequential | None:
    """The sequential settings of a run, from the command line over the policy's, or None.

    :raises ConfigError: when a sequential run is asked for without a policy, or with a batch below 1.
    """
    options = suite.policy.sequential if suite.policy is not None else None
    if not until_decided and not (options is not None and options.until_decided):
        if seed is not None or batch is not None:
            raise ConfigError("--seed and --batch set the order and the looks of a sequential run"
                              + (" (or --seed the cases --sample draws)" if batch is None else ""),
                              fix="add --until-decided" + (" or --sample N" if batch is None else "")
                              + ", or leave them out")
        return None
    if suite.design.cluster == "metadata.conversation":  # conversations.py: the conversation is the unit
        raise ConfigError("a sequential run looks at cases one by one, and this suite's cases hold conversations",
                          fix="run without --until-decided (and sequential.until_decided)")
    if not suite.design.plain:
        raise ConfigError("a sequential run looks at cases one by one, and this suite sets trials or cluster",
                          fix="run without --until-decided (and sequential.until_decided), or without trials "
                              "and cluster")
    if suite.policy is None:
        raise ConfigError("--until-decided stops when the gate is decided, and this suite has no policy",
                          fix="add a policy with rules to oloproof.yaml, or run without --until-decided")
    seed = options.seed if seed is None else seed
    batch = options.batch if batch is None else batch
    if batch < 1:
        raise ConfigError(f"the batch must be at least 1 case, got {batch}", fix="pass --batch 10")
    return Sequential(seed=seed, batch=batch, interval=options.interval if options is not None else "betting")


def series(header: dict, policy: Any, total: int) -> str:
    """What makes two sequential runs re-orderings of one another: the same suite (its config file,
    evaluators and cases), policy and system name and version, whatever the seed of the order."""
    from oloproof_core.decisions.gate import policy_data
    from oloproof_core.model.identity import digest

    rules = policy_data(policy) or {}
    rules.get("sequential", {}).pop("seed", None)
    selection = {k: v for k, v in (header.get("selection") or {}).items() if k != "seed"}
    return digest({"config": header["config"], "system": [header["system"]["name"], header["system"]["version"]],
                   "evaluators": header["evaluators"], "cases": total, "selection": selection, "policy": rules})


def earlier_orders(store: Any, key: str, seed: int) -> list[dict]:
    """The earlier sequential runs of the same :func:`series` whose cases ran in another order."""
    found = []
    for header in store.list_runs():
        record = header.get("sequential") or {}
        if record.get("series") == key and record.get("seed") != seed:
            found.append({"run": header["id"], "seed": record.get("seed")})
    return found


def reordering_warning(earlier: Sequence[dict], seed: int) -> str:
    """One line: running the same suite again in a new order until one PASSes is not a valid test."""
    seeds = sorted({e["seed"] for e in earlier}, key=str)
    shown = ", ".join(str(s) for s in seeds[:5]) + (", ..." if len(seeds) > 5 else "")
    return (f"Warning: this suite, policy and system version already ran sequentially with seed{'s' if len(seeds) > 1 else ''} "
            f"{shown} ({len(earlier)} run{'s' if len(earlier) > 1 else ''}); re-ordering the cases (seed {seed}) "
            "until a PASS voids the false-PASS guarantee: decide on the first order, or change the system")

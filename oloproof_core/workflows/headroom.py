"""Headroom: every case of a run re-executed under each chosen intervention, beside its control.

Where diagnose asks "why did this failed case fail", headroom asks "what would this change buy
on the whole suite": per intervention, the paired difference of the criterion between the
intervention's child run and its control's (compare's pairing and interval, in the run's units:
trial means, cluster means), the cases it fixed and broke, and what the re-executions cost. The
rows are ranked by the lower bound of the gain. A row is a candidate experiment, never a cause.
"""

from __future__ import annotations

import contextlib
from typing import Any

from oloproof_core.decisions.compare import Pairing
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.identity import digest
from oloproof_core.results.view import case_changes, change_of, paired_entry
from oloproof_core.workflows.diagnose import Diagnosis, replayed_history



def needs_gold_context(intervention: Any) -> bool:
    """Whether the intervention can only re-execute a case that declares ``expected.gold_context``."""
    return bool(getattr(intervention, "needs_gold_context", intervention.name == "gold-context"))


def context_tokens(row: dict) -> int | None:
    """The tokens of the context items a stored row (and its trials) recorded; None when no item
    recorded its tokens."""
    total, seen = 0, False
    for execution in row.get("trials") or [row]:
        for context in (execution.get("artifacts") or {}).get("context/v1", ())[-1:]:
            for item in context.get("items", ()):
                if isinstance(item.get("tokens"), int):
                    total, seen = total + item["tokens"], True
    return total if seen else None


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


class Headroom(Diagnosis):
    """One ``oloproof headroom`` invocation: every case of the run, under each intervention."""

    def __init__(self, suite: Any, plugins: Any, store: Any, run_id: str, criterion: str,
                 confidence: float = 0.95, sequential: dict | None = None):
        """:param sequential: ``{seed, batch, margin}`` (margin a fraction, or None) to stop each
            intervention once its interval excludes zero or lies below the margin; None runs every case."""
        super().__init__(suite, plugins, store, run_id, criterion)
        if not 0.0 < confidence < 1.0:
            raise ConfigError(f"the confidence level must be between 0 and 1, got {confidence}",
                              where="--confidence", fix="write --confidence 0.95")
        self.confidence = confidence
        self.sequential = sequential
        self.records = list(store.run_cases(run_id))
        ids = {r["id"] for r in self.records}
        self.cases = {c.id: c for c in suite.cases if c.id in ids}
        gone = sorted(ids - set(self.cases))
        if gone:
            raise ConfigError(f"case {gone[0]!r} of {run_id} is no longer in the case file",
                              fix="measure headroom on a run of the current cases")
        # a conversation's turn: re-executed with the history the run recorded (conversations.md)
        self.cases, _ = replayed_history(self.cases, {r["id"]: r for r in self.records}, suite.cases)
        self.clustered = bool((self.header.get("design") or {}).get("cluster"))
        if sequential is not None and (self.trials > 1 or self.clustered):
            raise ConfigError(f"{run_id} has {'trials' if self.trials > 1 else 'clusters'}, and --until-decided "
                              "stops on the paired difference of single cases",
                              where="--until-decided", fix="measure headroom on every case: leave --until-decided out")
        if sequential is not None and (not isinstance(sequential.get("batch"), int) or sequential["batch"] < 1):
            raise ConfigError(f"--batch must be a whole number >= 1, got {sequential.get('batch')!r}",
                              where="--batch", fix="write --batch 10")

    def measure(self, interventions: list[tuple[Any, dict]]) -> tuple[str, dict]:
        """Re-execute every case under each (intervention, its plain options) and its control, store
        the child runs and the headroom record, and return its content id and the record."""
        system = self.suite.system
        for made, _ in interventions:  # every option is checked before anything is re-executed
            if made.supports(system):
                made.check(system)
        rows, children = [], []
        for made, options in interventions:
            row: dict = {"intervention": made.name, "label": made.label, "control_label": made.control_label,
                         "supported": bool(made.supports(system))}
            if not row["supported"] and callable(getattr(system, "accepts", None)):
                row["unsupported"] = "no_override"  # a service that could take it, once its request says where
            eligible = [r for r in self.records
                        if not needs_gold_context(made) or self.cases[r["id"]].expected.get("gold_context")]
            row["not_run"] = [{"id": r["id"], "reason": "no_gold_context"}
                              for r in self.records if r not in eligible]
            if not row["supported"] or not eligible:
                rows.append(row)
                continue
            self.options = dict(options)  # what an executor's workers rebuild the intervention from
            prepare = getattr(made, "prepare", None)  # an intervention that reads the run first (distractors)
            if prepare is not None:
                self.options.update(prepare(self.records) or {})
            control_role = f"{made.control_label} of {made.label}"
            if self.sequential is not None:
                eligible, applied, controlled, run_id, control_id, row["stopped"] = self.until_decided(
                    made, control_role, eligible)
            else:
                run_id, _, _ = self.child_run(made.label, made, eligible, "apply")
                applied = self.pending[-1][1]
                control_id, _, _ = self.child_run(control_role, made, eligible, "control")
                controlled = self.pending[-1][1]
            row.update(self.paired(eligible, applied, controlled))
            row.update(run=run_id, control_run=control_id)
            children += [[made.label, run_id], [control_role, control_id]]
            rows.append(row)
        rows.sort(key=rank_key)
        record = {"kind": "headroom", "run": self.run_id, "criterion": self.criterion,
                  "confidence_level": self.confidence, "cases": len(self.records), "trials": self.trials,
                  "unit": "clusters" if self.clustered else "cases", "relevance_unit": self.unit,
                  "rows": rows, "children": children}
        if self.sequential is not None:
            record["sequential"] = dict(self.sequential)
        object_id = "sha256:" + digest(record)
        batch = getattr(self.store, "batch", None)
        with batch() if batch is not None else contextlib.nullcontext():
            for header, stored, summary in self.pending:
                self.store.save_run(header, stored, summary)
            self.store.put_object("headroom", object_id, record)
        return object_id, record

    def until_decided(self, made: Any, control_role: str, eligible: list[dict]) -> tuple:
        """Re-execute the cases in batches, in an order drawn from the seed, until the paired
        interval excludes zero or lies below the margin (or every case ran). The interval is the
        paired betting interval compare prints, a confidence sequence: valid at every look
        (statistics.md#sequential-runs-confidence-sequences). The batches are stored as one child
        run and one control. Returns the cases run in their order, both sides' rows, both run ids
        and how it stopped."""
        import random

        order = list(eligible)
        random.Random(self.sequential["seed"]).shuffle(order)
        batch, margin = self.sequential["batch"], self.sequential.get("margin")
        done, applied, controlled, first, looks, reason = [], [], [], None, 0, None
        for start in range(0, len(order), batch):
            part = order[start:start + batch]
            self.child_run(made.label, made, part, "apply")
            mine = self.pending.pop()
            self.child_run(control_role, made, part, "control")
            theirs = self.pending.pop()
            first = first or (mine, theirs)
            done, applied, controlled, looks = done + part, applied + mine[1], controlled + theirs[1], looks + 1
            entry = self.paired(done, applied, controlled)["paired"]
            low, high = entry.get("low"), entry.get("high")
            if low is not None and (low > 0 or high < 0):
                reason = "interval_excludes_zero"
            elif high is not None and margin is not None and high < margin:
                reason = "interval_below_margin"
            if reason:
                break
        ids = []
        for (header, _, summary), rows in zip(first, (applied, controlled)):
            self.pending.append(({**header, "cases": len(rows)}, rows, summary))
            ids.append(header["id"])
        stopped = {"after": len(done), "of": len(order), "looks": looks, "reason": reason}
        return done, applied, controlled, ids[0], ids[1], stopped

    def paired(self, parents: list[dict], applied: list[dict], controlled: list[dict]) -> dict:
        """The paired difference of the intervention against its control (compare's pairing, over
        the run's clusters when it has them), the cases fixed and broken, and the cost."""
        pairing = Pairing(self.criterion, self.clustered)
        fixed, broken = [], []
        for parent, x, y in zip(parents, applied, controlled):
            cluster = {"cluster": parent["cluster"]} if parent.get("cluster") is not None else {}
            pairing.add({**x, **cluster}, {**y, **cluster})
            for change in case_changes(x, y, [self.criterion]):
                direction = change_of(change)
                if direction == "fixed":
                    fixed.append(x["id"])
                elif direction == "broken":
                    broken.append(x["id"])
        entry = paired_entry(pairing.paired(), self.confidence)
        return {"paired": entry, "fixed": sorted(fixed), "broken": sorted(broken),
                "cost": {"calls": len(applied) * self.trials, "control_calls": len(controlled) * self.trials,
                         "context_tokens": _sum([context_tokens(x) for x in applied]),
                         "control_context_tokens": _sum([context_tokens(y) for y in controlled])}}


def rank_key(row: dict) -> tuple:
    """Highest lower bound of the gain first; rows without an interval (unsupported, nothing run,
    no pair observed) last, in the order given."""
    low = (row.get("paired") or {}).get("low")
    return (low is None, -(low if low is not None else 0.0), -((row.get("paired") or {}).get("difference") or 0.0))

"""``oloproof label``: plan which cases of a run people should label, and label them.

The plan reads a stored run alone (no key, no model): for each judge criterion (one whose verdicts
carry a judge's ``prompt_version``), the human labels that already apply (``engine/human.py``), and
for each undecided rule on it the fewest labels, from each judge-verdict stratum, whose human-level
interval would decide the rule if the agreement seen so far holds (``human_level.plan_labels``).
It then draws the cases to label at random within each stratum (seeded by ``--seed`` and
the criterion) and stores the choice as an object of kind ``label_plan``, so that the labelled
cases stay a random sample of their strata: label the planned cases, all of them, not the ones
that look interesting.
"""

from __future__ import annotations

import random
import time
from typing import Any

from oloproof_core.engine.human import human_evidence
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.identity import digest
from oloproof_core.statistics.display import percent
from oloproof_core.statistics.human_level import Labelled, plan_labels
from oloproof_core.storage.labels import execution_digest, stored_labels
from oloproof_core.storage.stores import resolve_reference

UNDECIDED = ("INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW")


def judge_criteria(records: list[dict]) -> list[str]:
    """The criteria of a run a judge graded: their verdicts record the judge's prompt version."""
    out: list[str] = []
    for record in records:
        for criterion, judgment in record.get("judgments", {}).items():
            if criterion not in out and "prompt_version" in (judgment.get("detail") or {}):
                out.append(criterion)
    return out


def verdicts_of(records: list[dict], criteria: list[str]) -> list[tuple]:
    return [(r["id"], execution_digest(r), {c: r["judgments"].get(c, {}).get("status") for c in criteria})
            for r in records]


def make_plan(store: Any, run_id: str, criterion: str | None = None, seed: int = 0, count: int | None = None,
              labels_files: dict | None = None) -> tuple[list[str], list[tuple[str, dict]]]:
    """Plan the labels of every judge criterion of a run (or of ``criterion``); store each plan.

    :param count: label this many cases of each criterion in all (labels already made included)
        instead of what the rules need.
    :param labels_files: criterion -> case id -> label, the policy's labels files (``human.file_labels``).
    :return: the lines to print and the (object id, plan) stored.
    """
    run_id = resolve_reference(store, run_id)
    header, summary = store.get_run(run_id)
    records = list(store.run_cases(run_id))
    criteria = judge_criteria(records)
    if criterion is not None:
        if criterion not in criteria:
            raise ConfigError(f"run {run_id} has no judge criterion {criterion!r}",
                              fix=f"use one of: {', '.join(criteria)}" if criteria else "plan labels of a run with judges")
        criteria = [criterion]
    if not criteria:
        raise ConfigError(f"run {run_id} has no criterion graded by an LLM judge", fix="plan labels of a run with judges")
    confidence = header.get("confidence_level", 0.95)
    verdicts = verdicts_of(records, criteria)
    evidence = human_evidence(criteria, verdicts, store, labels_files or {})
    rules = {r["id"]: r for r in (summary.get("policy") or {}).get("rules", [])}
    out, plans = [f"Label plan for run {run_id} (seed {seed})"], []
    for name in criteria:
        t = evidence[name].labelled if name in evidence else Labelled()
        passes = sum(1 for _, _, s in verdicts if s[name] == "pass")
        judged = sum(1 for _, _, s in verdicts if s[name] in ("pass", "fail"))
        out.append(f"{name}: {judged} judged ({passes} judge passes, {judged - passes} judge fails); "
                   f"{t.n} labelled ({t.pp + t.pf} judge passes, {t.fp + t.ff} judge fails)")
        want = (0, 0)
        for d in summary.get("decisions", []):
            rule = rules.get(d["rule"], {})
            if d["metric"] != name or rule.get("kind", "interval") != "interval":
                continue
            threshold = rule.get("min") if rule.get("min") is not None else rule.get("max")
            if d["verdict"] not in UNDECIDED:
                out.append(f"  rule {d['rule']}: {d['verdict']}, decided")
                continue
            need = plan_labels(passes, judged, t, threshold, confidence)
            assumed = "" if t.pp + t.pf and t.fp + t.ff else " (a stratum without labels is assumed 90% in agreement)"
            if need is None:
                out.append(f"  rule {d['rule']} ({'min' if rule.get('min') is not None else 'max'} "
                           f"{percent(threshold)}): no number of labels of this run's {judged} cases would decide it "
                           f"if the agreement holds; label them all, or run more cases")
                need = (passes, judged - passes)
            else:
                out.append(f"  rule {d['rule']} ({'min' if rule.get('min') is not None else 'max'} {percent(threshold)}): "
                           f"about {sum(need)} labels would decide it if the agreement holds{assumed}: {need[0]} of "
                           f"the judge's passes, {need[1]} of its fails")
            want = (max(want[0], need[0]), max(want[1], need[1]))
        if count is not None:
            share = passes / judged if judged else 0.0
            n1 = min(passes, max(t.pp + t.pf, round(count * share)))
            want = (n1, min(judged - passes, max(t.fp + t.ff, count - n1)))
        plan = pick_cases(run_id, name, seed, verdicts, store, evidence.get(name), want, labels_files or {})
        if not plan["cases"]:
            left = sum(x["cases"] - x["labelled"] for x in plan["strata"].values())
            out.append("  nothing to label: " + ("every case is labelled" if not left else
                                                 "the labels already made are what the plan asks"))
            continue
        object_id = "sha256:" + digest(plan)
        store.put_object("label_plan", object_id, plan)
        plans.append((object_id, plan))
        out.append(f"  planned: {len(plan['cases'])} cases to label ({plan['strata']['pass']['planned']} judge "
                   f"passes, {plan['strata']['fail']['planned']} judge fails), drawn at random within each; "
                   f"plan {object_id[:15]}…")
    if plans:
        out.append(f"Next: oloproof label {run_id} --terminal, then oloproof run")
    return out, plans


def pick_cases(run_id: str, criterion: str, seed: int, verdicts: list[tuple], store: Any, evidence: Any,
               want: tuple[int, int], filed: dict) -> dict:
    """Draw the cases to label, at random within each judge-verdict stratum, among the unlabelled."""
    stored = stored_labels(store, criterion)
    from_file = filed.get(criterion, {})
    rng = random.Random(f"{seed}:{criterion}")  # the same draw for the same verdicts, whatever the run id
    strata, chosen = {}, []
    for stratum in ("pass", "fail"):
        ids = [case for case, execution, s in verdicts if s[criterion] == stratum]
        done = [case for case, execution, s in verdicts if s[criterion] == stratum
                and ((criterion, case, execution) in stored or case in from_file)]
        open_ = [case for case in ids if case not in set(done)]
        target = want[0] if stratum == "pass" else want[1]
        drawn = rng.sample(open_, min(len(open_), max(0, target - len(done))))
        strata[stratum] = {"cases": len(ids), "labelled": len(done), "planned": len(drawn)}
        chosen += drawn
    rng.shuffle(chosen)  # labelled in a random order, so the judge's verdict cannot be guessed from it
    return {"kind": "label_plan", "run": run_id, "criterion": criterion, "seed": seed, "strata": strata,
            "cases": chosen, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

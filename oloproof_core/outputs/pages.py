"""View models of stored results: plain data that the viewer's pages and the HTML export render.

Nothing here formats HTML or writes to the store. Numbers come from the stored summaries, and
slice summaries from the same metric plugins a run uses, so a page shows what ``oloproof run``
printed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import Judgment
from oloproof_core.model.retrieval import context_names, unit_key

from oloproof_core.storage.query import STATUSES, dump_text, query_cases, status_of  # noqa: F401 - the viewer reads them here

PER_PAGE = 50


class Records:
    """The case records of runs, parsed once per process (runs are immutable)."""

    def __init__(self, store: Any, keep: int = 4):
        self.store, self.keep = store, keep
        self._runs: OrderedDict[str, list[dict]] = OrderedDict()
        self._derived: dict[str, dict] = {}

    def __call__(self, run_id: str) -> list[dict]:
        if run_id not in self._runs:
            self._runs[run_id] = list(self.store.run_cases(run_id))
            while len(self._runs) > self.keep:
                self._derived.pop(self._runs.popitem(last=False)[0], None)
        self._runs.move_to_end(run_id)
        return self._runs[run_id]

    def derived(self, run_id: str, key: Any, build: Any) -> Any:
        """``build(records)`` of a run, computed once and kept as long as its records are (a
        page's view, a search index, a sort order): no page scans a large run twice."""
        records = self(run_id)
        memo = self._derived.setdefault(run_id, {})
        if key not in memo:
            memo[key] = build(records)
        return memo[key]


def _scale(low: float | None, high: float | None, value: float | None, marks: Iterable[float]) -> tuple[float, float]:
    points = [p for p in (low, high, value, *marks) if p is not None]
    return (min([0.0, *points]), max([1.0, *points]))


def metric_rows(document: dict) -> list[dict]:
    """Each metric of a run document with its interval and the policy's thresholds on it, placed on
    a 0-100 axis for the interval plot."""
    rows = []
    for m in document["metrics"]:
        thresholds = [(d["rule"], kind, d["threshold"][kind]) for d in document["decisions"]
                      if d["metric"] == m["name"] for kind in ("min", "max") if kind in d["threshold"]]
        lo, hi = _scale(m["low"], m["high"], m["estimate"], [t[2] for t in thresholds])

        def at(x: float | None, lo: float = lo, hi: float = hi) -> float | None:
            return None if x is None else round(100 * (x - lo) / (hi - lo), 2)

        display = m["display"]
        rows.append({"name": m["name"], "cells": [display["estimate"], display["interval"], display["counts"]],
                     "axis": [f"{lo:.3g}", f"{hi:.3g}"],
                     "x": {"value": at(m["estimate"]), "low": at(m["low"]), "high": at(m["high"])},
                     "thresholds": [{"rule": rule, "kind": kind, "at": at(value), "value": value}
                                    for rule, kind, value in thresholds]})
    return rows


def slice_rows(header: dict, records: list[dict], metrics: dict, confidence: float,
               kinds: dict | None = None) -> list[dict]:
    """The slice table, summarised by the run's own metric plugins; ``supported`` is False below
    ``min_slice_support`` observed cases (no interval is shown for those).

    :param kinds: criterion -> the metric its row of the run's metric table was printed as
        (``mean``, ``proportion``): every group prints in that format.
    """
    from oloproof_core.statistics.display import cells_like

    support = header.get("min_slice_support", 10)
    kinds = kinds or {}
    design = header.get("design")
    if design:  # a run with trials or clusters: over the same units as the run (units.py)
        from oloproof_core.statistics.units import Design, unit_metrics

        metrics = unit_metrics(metrics, Design(**design))
    out = []
    for name in header.get("slices", []):
        shown = (header.get("slice_criteria") or {}).get(name)  # None: every criterion
        groups: dict[str, list[dict]] = {}
        for record in records:
            group = (record.get("slices") or {}).get(name)
            if group is not None:
                groups.setdefault(str(group), []).append(record)
        panel = {"slice": name, "groups": []}
        for group in sorted(groups):
            members = groups[group]
            cells = []
            for criterion, metric in metrics.items():
                if shown is not None and criterion not in shown:
                    continue
                judged = [r for r in members if criterion in r.get("judgments", {})]
                judgments = [Judgment.from_data(r["judgments"][criterion]) for r in judged]
                if design:  # (imported under another name: ``group`` is this loop's slice group)
                    from oloproof_core.statistics.units import group as per_unit

                    judgments = per_unit(judgments, [r.get("cluster") for r in judged])
                s = metric.summarize(judgments, confidence)
                estimate, interval, counts = cells_like(s, kinds.get(criterion))
                cells.append({"criterion": criterion, "estimate": estimate, "interval": interval,
                              "counts": counts, "value": s.value, "supported": s.observed >= support,
                              "observed": s.observed})
            panel["groups"].append({"group": group, "cells": cells})
        out.append(panel)
    return out


def run_view(store: Any, plugins: Any, run_id: str, records: list[dict] | None = None, read: bool = True) -> dict:
    """The run's ``oloproof.run`` document (what --json writes), with what its page adds: the
    interval plots, the slice panels, the child runs and the criteria of the cases table.
    ``records`` None: a run too large to read at once for a page, so no slice panels, and the
    missing cases' reasons counted in one streaming pass (``whole`` False), or not at all when
    ``read`` is False (a page served before that pass)."""
    from oloproof_core.outputs.report import unit_lines  # Clusters:, First failing turn:, Unstable: as printed
    from oloproof_core.results.view import run_view as run_document

    header, summary = store.get_run(run_id)
    rows = records if records is not None else []
    document = run_document(header, summary, rows if records is not None or not read else store.run_cases(run_id))
    metrics = {}
    for criterion, name in header.get("metrics", {}).items():
        try:
            metrics[criterion] = plugins.metrics.get(name).factory()
        except ConfigError:  # a metric whose plugin is not installed here: no slice summaries for it
            continue
    confidence = header.get("confidence_level", 0.95)
    return {"header": header, "summary": summary, "document": document, "confidence": confidence,
            "metrics": metric_rows(document), "units": [line for line in unit_lines(
                summary, header.get("design"), confidence) if line],
            "slices": slice_rows(header, rows, metrics, confidence,
                                 {name: m.get("metric") for name, m in summary["metrics"].items()}),
            "whole": records is not None,
            "min_slice_support": header.get("min_slice_support", 10),
            "criteria": list(header.get("evaluators", {})),
            "children": [h for h in store.list_runs() if h.get("parent") == run_id]}


def cases_view(records: list[dict], criteria: list[str], per_page: int = PER_PAGE) -> dict:
    """The first page of records already read, unfiltered (the HTML export: every case of a run)."""
    shown = records[:per_page]
    return {"total": len(records), "matching": len(records), "page": 1, "pages": max(1, -(-len(records) // per_page)),
            "filters": {"criterion": "", "status": "", "q": "", "sort": "", "desc": "", "conversation": ""},
            "rows": case_rows(shown, criteria)}


def case_rows(records: list[dict], criteria: list[str]) -> list[dict]:
    """The cases table's rows: each case's id, missing reason, and each criterion's status and value."""
    return [{"id": r["id"], "missing": r.get("missing"),
             "statuses": [status_of(r["judgments"][c]) if c in r.get("judgments", {}) else "" for c in criteria],
             "values": [(r["judgments"][c].get("value") if c in r.get("judgments", {}) else None) for c in criteria]}
            for r in records]


def cases_page(store: Any, run_id: str, criteria: list[str], page: int = 1, criterion: str | None = None,
               status: str | None = None, query: str | None = None, sort: str | None = None, desc: bool = False,
               per_page: int = PER_PAGE, conversation: str | None = None) -> dict:
    """One page of a run's cases table from the store (``query_cases``: an index where the store
    has one, a scan where it has not), never the whole run in memory; with ``conversation``, that
    conversation's turns (outputs/conversation.py)."""
    filters = {"criterion": criterion or "", "status": status or "", "q": query or "", "sort": sort or "",
               "desc": "1" if desc else "", "conversation": conversation or ""}
    if conversation:
        from oloproof_core.outputs.conversation import conversation_cases

        found = conversation_cases(store, run_id, criteria, conversation, criterion, status, query, sort, desc)
        rows = case_rows(found.pop("records"), criteria)
        return {**found, "filters": filters, "rows": rows}
    ask = {"search": query or None, "criterion": criterion if status else None, "status": status, "sort": sort,
           "desc": desc, "limit": per_page}
    page = max(1, page)
    found = query_cases(store, run_id, offset=(page - 1) * per_page, **ask)
    pages = max(1, -(-found["matching"] // per_page))
    if page > pages:
        page = pages
        found = query_cases(store, run_id, offset=(page - 1) * per_page, **ask)
    total = store.get_run(run_id)[0].get("cases")
    return {"total": found["matching"] if total is None else total, "matching": found["matching"], "page": page,
            "pages": pages, "filters": filters, "rows": case_rows(found["records"], criteria)}


def _relevance(case: dict) -> list[dict]:
    labels = (case.get("expected") or {}).get("relevant")
    return [label for label in labels if isinstance(label, dict)] if isinstance(labels, list) else []


def _relevant_mark(item: dict, labels: list[dict], unit: str) -> str:
    """Whether a passage is relevant at the run's relevance unit, and by what: ``chunk`` when a
    label names its chunk (``relevance_unit: chunk``), ``doc`` when its document counts as one unit
    (``relevance_unit: doc``, or a label without a chunk_id); empty when it is not relevant."""
    whole = frozenset(str(label["doc_id"]) for label in labels if label.get("chunk_id") is None)
    grades: dict[str, float] = {}
    for label in labels:  # the labels were checked when the cases were read
        key = unit_key(label, unit, whole)
        grades[key] = max(grades.get(key, 0.0), float(label.get("grade", 1)))
    if item.get("doc_id") is None:
        return ""
    key = unit_key(item, unit, whole)
    if not grades.get(key):
        return ""
    return "chunk" if "#" in key else "doc"


def case_view(store: Any, records: Records, run_id: str, case_id: str) -> dict:
    header, _ = store.get_run(run_id)
    record = (store.run_case(run_id, case_id) if hasattr(store, "run_case")  # one row, by its index
              else next((r for r in store.run_cases(run_id) if r["id"] == case_id), None))
    if record is None:
        raise ConfigError(f"run {run_id} has no case {case_id!r}", fix="pick a case from the run's page")
    diagnoses = []
    for object_id, diagnosis in store.list_objects("diagnosis"):
        if diagnosis.get("run") != run_id:
            continue
        for entry in diagnosis.get("cases", []):
            if entry.get("id") == case_id:
                diagnoses.append({"id": object_id, "label": entry.get("label"), "reason": entry.get("reason"),
                                  "evidence": entry.get("evidence"),
                                  "intervention": diagnosis.get("label") or diagnosis.get("intervention"),
                                  "children": diagnosis.get("children", [])})
    trials = [{"trial": n, "output": t.get("output"), "missing": t.get("missing"),
               "judgments": t.get("judgments") or {}} for n, t in enumerate(record.get("trials") or [], 1)]
    return {"run": header, "record": record, "case": record.get("case") or {}, "judgments": record.get("judgments", {}),
            "trials": trials, **evidence(header, record), "diagnoses": diagnoses,
            "conversation": transcript(store, header, run_id, record)}


def evidence(header: dict, record: dict) -> dict:
    """What one case record shows of its retrieval, context and citations: each candidate's rank,
    score, relevance at the run's unit and fate in the context; the context's tokens; each
    citation in the context or not; the other artifacts."""
    case = record.get("case") or {}
    labels = _relevance(case)
    judgments = record.get("judgments") or {}
    # without human labels, the relevance judge's the metrics read (relevance: {source: judge})
    judged_by = None if labels else next((j["detail"]["judged"] for j in judgments.values()
                                          if isinstance((j.get("detail") or {}).get("judged"), str)), None)
    if judged_by:
        labels = [label for label in ((judgments.get(judged_by) or {}).get("detail") or {}).get("labels", [])
                  if isinstance(label, dict) and label.get("doc_id") is not None]
    unit = header.get("relevance_unit") or "doc"
    artifacts = record.get("artifacts") or {}
    retrieval = (artifacts.get("retrieval/v1") or [None])[-1]
    context = (artifacts.get("context/v1") or [None])[-1]
    cited = (artifacts.get("citations/v1") or [None])[-1]
    kept = {(i.get("doc_id"), i.get("chunk_id"), i.get("position")) for i in (context or {}).get("items", [])}
    dropped = {(d.get("doc_id"), d.get("chunk_id"), d.get("position")): d.get("reason")
               for d in (context or {}).get("dropped", [])}
    candidates = []
    for rank, passage in enumerate((retrieval or {}).get("candidates", []), 1):
        key = (passage.get("doc_id"), passage.get("chunk_id"), rank)
        fate = "kept" if key in kept else f"dropped: {dropped[key]}" if key in dropped else (
            "not in context" if context else "")
        candidates.append({"rank": rank, "score": passage.get("score"), "doc_id": passage.get("doc_id"),
                           "chunk_id": passage.get("chunk_id"), "text": passage.get("text"),
                           "relevant": _relevant_mark(passage, labels, unit), "fate": fate})
    in_context = context_names(context or {})  # as the citation_validity evaluator reads them
    return {"relevance_unit": unit, "retrieval": retrieval, "candidates": candidates, "context": context,
            "tokens_used": sum(i.get("tokens") or 0 for i in (context or {}).get("items", [])),
            "citations": [{"id": c, "valid": c in in_context} for c in (cited or {}).get("ids", [])],
            "labels": labels, "judged_by": judged_by, "other_artifacts": {
                k: v for k, v in artifacts.items() if k not in ("retrieval/v1", "context/v1", "citations/v1")}}


def transcript(store: Any, header: dict, run_id: str, record: dict) -> dict | None:
    """A turn case's whole conversation in the run: each turn's input, output (or why it has none),
    judgments, retrieval table and the query it searched for (``query_rewrite/v1``, else the
    retrieval's), the current turn marked; and the conversation's verdicts of the conversation
    criteria. None for a plain case or a conversation of one turn."""
    from oloproof_core.outputs.conversation import conversation_verdicts, turn_of, turn_records

    at = turn_of(record)
    if at is None:
        return None
    records = turn_records(store, run_id, at[0], known=record)
    verdicts = conversation_verdicts(header, records)
    whole = {v["criterion"] for v in verdicts}  # shown once, for the conversation, not under a turn
    turns = []
    for r in records:
        shown = evidence(header, r)
        rewrite = ((r.get("artifacts") or {}).get("query_rewrite/v1") or [None])[-1]
        query = rewrite.get("query") if isinstance(rewrite, dict) else (shown["retrieval"] or {}).get("query")
        turns.append({"id": r["id"], "turn": turn_of(r)[1], "current": turn_of(r) == at,
                      "input": (r.get("case") or {}).get("input"), "output": r.get("output"),
                      "missing": r.get("missing"), "query": query, "candidates": shown["candidates"],
                      "judgments": {c: j for c, j in (r.get("judgments") or {}).items() if c not in whole},
                      "labels": shown["labels"]})
    return {"id": at[0], "turn": at[1], "turns": turns, "verdicts": verdicts} if len(turns) > 1 else None


def paired_differences(candidate: list[dict], baseline: list[dict], policy: dict) -> list[dict]:
    """Each shared criterion's paired difference in points with its interval (compare's own
    computation) and the policy's margins on a symmetric axis."""
    from oloproof_core.decisions.compare import pair
    from oloproof_core.statistics.display import points_cells

    confidence = policy.get("confidence_level", 0.95)
    cand, base = {r["id"]: r for r in candidate}, {r["id"]: r for r in baseline}
    ids = [i for i in cand if i in base]
    first = (cand[ids[0]].get("judgments", {}), base[ids[0]].get("judgments", {})) if ids else ({}, {})
    criteria = [c for c in first[0] if c in first[1]]
    rows = []
    for criterion in criteria:
        paired = pair(criterion, cand, base, ids)
        if not paired.n:
            continue
        diff, low, high = (100 * x for x in paired.interval(confidence))
        margins = []
        for rule in policy.get("rules", []):
            if rule.get("metric") == criterion and rule.get("kind") in ("non-inferiority", "superiority"):
                at = -(rule.get("margin") or 0.0) if rule["kind"] == "non-inferiority" else (rule.get("margin") or 0.0)
                margins.append({"rule": rule["id"], "kind": rule["kind"], "value": at})
        reach = max([5.0, abs(low), abs(high), *(abs(m["value"]) for m in margins)])

        def at(x: float, reach: float = reach) -> float:
            return round(50 + 50 * x / reach, 2)

        value, bounds = points_cells(diff / 100, low / 100, high / 100)
        rows.append({"criterion": criterion, "value": value, "interval": bounds, "paired": paired.n,
                     "axis": [f"{-reach:+.1f}", f"{reach:+.1f}"],
                     "x": {"value": at(diff), "low": at(low), "high": at(high), "zero": 50.0},
                     "margins": [{**m, "at": at(m["value"])} for m in margins]})
    return rows


def object_view(store: Any, records: Records, object_id: str) -> dict:
    """A stored comparison, diagnosis, headroom or judge validation, with what its page links to."""
    object_id, kind, record = store.get_object(object_id)
    view: dict = {"id": object_id, "kind": kind, "record": record,
                  "printed": [*record.get("summary", []), *record.get("lines", [])]}
    if kind == "comparison":
        from oloproof_core.outputs.text import stored_comparison
        from oloproof_core.results.view import change_of, changed_cases

        view["printed"] = stored_comparison(object_id, record)
        candidate, baseline = record.get("candidate"), record.get("baseline")
        view["candidate"], view["baseline"] = candidate, baseline
        new, old = ({r["id"]: r for r in records(run)} for run in (candidate, baseline))
        criteria = list(dict.fromkeys(c for r in new.values() for c in r.get("judgments", {})))
        view["changed"] = [{"id": c["case"], "criterion": c["criterion"], "change": change_of(c)}
                           for c in changed_cases(new, old, [i for i in new if i in old], criteria)
                           if change_of(c) != "changed"]  # passed <-> failed (or missing)
        view["differences"] = paired_differences(records(candidate), records(baseline), record.get("policy") or {})
        summaries = {run: store.get_run(run)[1].get("metrics", {}) for run in (candidate, baseline)}
        view["estimates"] = {d["criterion"]: [(summaries[run].get(d["criterion"]) or {}).get("cells", ["", ""])[:2]
                                              for run in (candidate, baseline)] for d in view["differences"]}
        view["planning"] = {d["rule"]: d.get("planning") for d in (record.get("view") or {}).get("decisions", [])}
    elif kind == "diagnosis":
        if "selected" in record:  # a diagnosis record: printed by the diagnosis renderer, as inspect does
            from oloproof_core.outputs.diagnosis import inspect_lines, summary_lines

            view["printed"] = [*summary_lines(record), *inspect_lines(record)]
        labels: dict[str, int] = {}
        for entry in record.get("cases", []):
            labels[entry.get("label")] = labels.get(entry.get("label"), 0) + 1
        view["labels"] = labels
        view["headrooms"] = [i for i, r in store.list_objects("headroom") if r.get("run") == record.get("run")]
    elif kind == "headroom":
        from oloproof_core.outputs.headroom import headroom_lines, headroom_rows

        view["printed"] = headroom_lines(object_id, record)
        view["rows"] = headroom_rows(record)
    return view

"""What ``oloproof diagnose`` and ``oloproof inspect DIAGNOSIS_ID`` print, from a diagnosis record.

The strongest words used are "Implicated" and "Candidate experiment"; a count of cases never
becomes a claim about why they failed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from oloproof_core.workflows.diagnose import ORDER, out_of_context
from oloproof_core.model.retrieval import evidence_words

DESCRIPTION = {
    "RETRIEVAL_MISS": "recovered; no relevant evidence was retrieved",
    "RANKED_OUT": "recovered; relevant evidence was retrieved below top-k",
    "CONTEXT_ASSEMBLY_LOSS": "recovered; relevant evidence within top-k was left out of the context",
    "GENERATION_FAILURE": "still failed with the gold context",
}
UNRESOLVED_WHY = {  # in the order the summary lists them
    "intervention_unsupported": "the system is not staged, so no case was re-executed",
    "unstable": "passed in some of the run's trials and failed in others, so it was unstable, not diagnosed",
    "passed_in_control": "passed when re-executed unchanged, so it was unstable, not diagnosed",
    "recovered_in_some_trials": "passed in some trials under the intervention and in none of the control, "
                                "not in all",
    "relevant_in_context": "recovered, though relevant evidence was already in the context",
    "no_relevance_labels": "recovered, but without relevance labels no stage can be implicated",
    "no_gold_context_diagnosis": "no gold-context diagnosis of this run labels it yet",
}
FACTORS = {  # label -> (implicated factor, candidate experiments); the order breaks no tie, all are listed
    "CONTEXT_ASSEMBLY_LOSS": ("context budget", ("a larger token budget", "smaller chunks")),
    "RANKED_OUT": ("ranking below top-k", ("a larger top-k", "a reranker")),
    "RETRIEVAL_MISS": ("retrieval", ("query expansion or rewriting", "a different retriever or index")),
    "GENERATION_FAILURE": ("generation", ("a prompt or model change",)),
}
NO_GOLD_FIX = ("declare the passages that would have answered the case in its `expected.gold_context`, as a "
               "list of `{doc_id, text}` objects; an intervention needs them to tell a retrieval failure from a "
               "generation one")
HYPOTHESIS = "This is a hypothesis to test, not an established cause."
UNIT_WORDS = {"doc": "documents", "chunk": "chunks"}
NO_OVERRIDE = ("the service does not declare where its request takes this intervention's override "
               "(system.http.interventions), so no case was re-executed")


def _cases(n: int) -> str:
    return f"{n} failed case" if n == 1 else f"{n} failed cases"


def turn_lines(record: dict) -> list[str]:
    """A diagnosis of conversation turns: the history each replayed, the turns whose earlier turns
    in the case file differ from it, and the labels counted per turn index."""
    turns = [c for c in record["cases"] if "turn" in c]
    if not turns:
        return []
    lines = ["History: each turn was re-executed with the earlier turns recorded in the run (inputs and outputs), "
             "not generated again"]
    for d in record.get("history_differs", ()):
        lines.append(f"History differs: {d['id']}'s earlier turns in the case file ({', '.join(d['turns'])}) are not "
                     "what the run recorded; the recorded history was replayed")
    by_turn: dict[int, Counter] = {}
    for c in turns:
        by_turn.setdefault(c["turn"], Counter())[c["label"]] += 1
    lines.append("Turns: " + "; ".join(
        f"turn {k}: " + ", ".join(f"{label} {n}" for label, n in sorted(counts.items(), key=lambda kv: ORDER.index(kv[0])))
        for k, counts in sorted(by_turn.items())))
    return lines


def summary_lines(record: dict) -> list[str]:
    """The summary ``oloproof diagnose`` prints before the diagnosis id."""
    n = record["selected"]
    lines = [f"Selected: {_cases(n)} with gold context (observed; no population claim)"]
    if record.get("evidence_min_grade") is not None:
        lines.append(f"Evidence: only relevant units of {grade_words(record)} count "
                     "(relevance.evidence_min_grade); a case with none is placed as unlabelled")
    judged = Counter(c["judged"] for c in record["cases"] if c.get("judged"))
    for judge, k in sorted(judged.items()):
        lines.append(f"Judged: the positions and evidence of {k} of {n} read the relevance labels of the LLM judge "
                     f"{judge} (relevance: {{source: judge}}), which graded the retrieved passages only")
    if record["excluded"]:
        lines.append(f"Excluded: {_cases(len(record['excluded']))}, no_gold_context - {NO_GOLD_FIX}")
    lines += turn_lines(record)
    cases = record["cases"]
    unstable = record.get("unstable", 0)  # a run with trials: cases that changed verdict, not re-executed
    if "trials" in record:
        lines.append(f"Unstable: {unstable} of {n} passed in some of the run's {record['trials']} trials and failed "
                     f"in others (UNRESOLVED, not re-executed); each other case is re-executed {record['trials']} "
                     "times, and recovers only if it passes in every trial")
    tried = n - unstable
    if not record["supported"]:
        shown = label_lines(cases, n)
        if record.get("unsupported") == "no_override":  # a service: it could, once its request says where
            shown = [line.replace(UNRESOLVED_WHY["intervention_unsupported"], NO_OVERRIDE) for line in shown]
        return lines + shown
    if not tried:
        return lines + label_lines(cases, n)
    lines.append(f"Control: {record['control_passed']} of {tried} passed when re-executed without the intervention")
    lines.append(f"Recovered under {record['label']}: {record['recovered']} of {tried}")
    if record["labels_by_recovery"]:
        return lines + label_lines(cases, n, record.get("evidence_min_grade")) + implication_lines(cases)
    confirms = record.get("confirms")
    if confirms:
        line = (f"Confirmed under {record['label']}: {confirms['confirmed']} of {confirms['tested']} "
                f"{confirms['label']} cases also recovered")
        lacking = confirms.get("lacking") or {}
        if lacking:
            line += "; " + "; ".join(f"{k} not recovered: relevant evidence {evidence_words(state)} {_where(record)}"
                                     for state, k in lacking.items())
        lines.append(line)
    gold = record.get("gold")
    if gold:
        done = sum(1 for c in gold["cases"] if c.get("recovered"))
        lines.append(f"Labels from gold context (diagnosis {gold['id']}): {done} of {len(gold['cases'])} recovered")
        lines += label_lines(gold["cases"], len(gold["cases"]), gold.get("evidence_min_grade"))
    else:
        lines.append("Labels from gold context: none yet; run `oloproof diagnose RUN_ID "
                     f"--intervention gold-context --criterion {record['criterion']}` first")
    return lines


def diagnosis_lines(object_id: str, record: dict, available: Mapping[str, Mapping] | None = None) -> list[str]:
    """Everything ``oloproof diagnose`` prints: the summary, the ids, and for the implicated labels
    the command of each installed intervention that tests them. ``available`` maps an
    intervention's name to what it declares: ``tests`` (the candidate experiment it tests),
    ``confirms`` (the label) and ``usage`` (its options on the command line)."""
    lines = summary_lines(record)
    lines.append(f"Diagnosis {object_id}")
    if record["children"]:
        lines.append("Child runs: " + ", ".join(f"{role} {run}" for role, run in record["children"]))
    lines.append(f"Cases: oloproof inspect {object_id}")
    if not (record["labels_by_recovery"] and record["supported"]):
        return lines
    available = available or {}

    def command(name: str) -> str:
        usage = available[name].get("usage") or "[--option KEY=VALUE ...]"
        return f"oloproof diagnose {record['run']} --intervention {name} {usage} --criterion {record['criterion']}"

    named = set()
    for _, experiment in implicated(record["cases"]):
        for name in sorted(available):
            if available[name].get("tests") == experiment:
                named.add(name)
                lines.append(f"To test {experiment}: {command(name)}")
    for label in dict.fromkeys(label for label, _ in implicated(record["cases"])):
        for name in sorted(available):
            if available[name].get("confirms") == label and name not in named:
                lines.append(f"To test the {label} cases under {name}: {command(name)}")
    return lines


def _where(record: dict) -> str:
    """Where a re-execution left the evidence: ``in the replay``, or ``under query-rewrite``."""
    return "in the replay" if record.get("control_label") == "replay control" else f"under {record['label']}"


def position_words(record: dict, position: object) -> str:
    """``best relevant position 2``; under chunk units ``best relevant chunk position 2``."""
    unit = record.get("relevance_unit", "doc")
    return f"best relevant {'chunk ' if unit == 'chunk' else ''}position {position}"


def inspect_lines(record: dict) -> list[str]:
    """What ``oloproof inspect DIAGNOSIS_ID`` prints: one line a case, the excluded ones, then
    where the run left each case's relevant evidence."""
    lines = []
    for c in record["cases"]:
        line = f"{c['id']}: {c['label']}, {c['reason']}, strength {c['strength']}, {position_words(record, c['position'])}"
        line += f" (judged: {c['judged']})" if c.get("judged") else ""
        if not record["labels_by_recovery"] and "recovered" in c:
            line += f", recovered under {record['label']}: {'yes' if c['recovered'] else 'no'}"
            if c.get("control_passed"):
                line += f", passed in {record['control_label']}"
            elif not c["recovered"] and out_of_context(c.get("replay_evidence")):
                line += f", relevant evidence {evidence_words(c['replay_evidence'])} {_where(record)}"
        lines.append(line)
    lines += [f"{e['id']}: not diagnosed, {e['reason']}" for e in sorted(record["excluded"], key=lambda e: e["id"])]
    observed = [c for c in record["cases"] if c.get("evidence")]
    if observed:
        unit = record.get("relevance_unit", "doc")
        grade = f", {grade_words(record)}" if record.get("evidence_min_grade") is not None else ""
        lines.append(f"Evidence in the run (relevance_unit {unit}: positions count {UNIT_WORDS[unit]}{grade}):")
        for c in observed:
            where = evidence_words(c["evidence"])
            if isinstance(c["position"], int):
                where += f", position {c['position']}"
            where += f" (judged: {c['judged']})" if c.get("judged") else ""
            lines.append(f"  {c['id']}: {where}")
    return lines


def grade_words(record: dict) -> str:
    """``grade 2 or more``: the evidence grade a diagnosis used (``relevance.evidence_min_grade``)."""
    return f"grade {record['evidence_min_grade']:g} or more"


def label_lines(cases: list[dict], n: int, min_grade: float | None = None) -> list[str]:
    """One line a label (``RETRIEVAL_MISS: 1 of 4, ...``), one a reason for UNRESOLVED. The
    GENERATION_FAILURE line counts apart the cases whose evidence never reached the context.
    With ``min_grade`` (relevance.evidence_min_grade) each line read from the evidence names it."""
    lines = _label_lines(cases, n)
    if min_grade is None:
        return lines
    graded = ("RETRIEVAL_MISS", "RANKED_OUT", "CONTEXT_ASSEMBLY_LOSS", "GENERATION_FAILURE", "UNRESOLVED: ")
    suffix = f" (evidence: {grade_words({'evidence_min_grade': min_grade})})"
    return [line + suffix if line.startswith(graded) and ("recovered" in line or "evidence" in line) else line
            for line in lines]


def _label_lines(cases: list[dict], n: int) -> list[str]:
    counts = Counter(c["label"] for c in cases)
    lines = []
    for label in ORDER:
        if not counts[label]:
            continue
        if label == "UNRESOLVED":
            reasons = Counter(c["reason"] for c in cases if c["label"] == label)
            order = [r for r in UNRESOLVED_WHY if r in reasons] + sorted(r for r in reasons if r not in UNRESOLVED_WHY)
            lines += [f"UNRESOLVED: {reasons[r]} of {n}, {UNRESOLVED_WHY.get(r, r)}" for r in order]
            continue
        line = f"{label}: {counts[label]} of {n}, {DESCRIPTION[label]}"
        if label == "GENERATION_FAILURE":
            apart = co_occurring(cases)
            if apart:
                line += f"; in {apart} of them the relevant evidence was not in the context"
        lines.append(line)
    return lines


def co_occurring(cases: list[dict]) -> int:
    """GENERATION_FAILURE cases whose relevant evidence the run left outside the context: the
    model failed with the gold passages, and the run had not given it them either."""
    return sum(1 for c in cases if c["label"] == "GENERATION_FAILURE" and out_of_context(c.get("evidence")))


def implicated(cases: list[dict]) -> list[tuple[str, str]]:
    """(label, candidate experiment) for each implicated label, in :data:`FACTORS` order."""
    counts = _supported(cases)
    top = max(counts.values())
    if not top:
        return []
    return [(label, text) for label, (_, experiments) in FACTORS.items() if counts[label] == top
            for text in experiments]


def _supported(cases: list[dict]) -> dict[str, int]:
    """Each stage label's count, generation counting only the cases the evidence supports."""
    counts = Counter(c["label"] for c in cases)
    out = {label: counts[label] for label in FACTORS}
    out["GENERATION_FAILURE"] -= co_occurring(cases)
    return out


def implication_lines(cases: list[dict]) -> list[str]:
    """The strongest words diagnosis uses: "Implicated" and "Candidate experiment".

    The most common label among the recovered-by-stage labels and GENERATION_FAILURE is
    implicated; labels tied at that count are all listed, never one picked by an arbitrary order.
    A recovered failure is one that recovered under the intervention and failed in the control.
    Generation counts only the cases whose relevant evidence was not observed outside the
    context: for the others, a generation fix alone could not be expected to recover them.
    """
    counts = _supported(cases)
    top = max(counts.values())
    if not top:
        return []
    recovered = sum(1 for c in cases if c.get("recovered") and not c.get("control_passed"))
    lines = []
    for label, (factor, experiments) in FACTORS.items():
        if counts[label] != top:
            continue
        if label == "GENERATION_FAILURE":
            line = f"Implicated: {factor}, in {top} of the {len(cases)} selected failures"
            apart = co_occurring(cases)
            line += (f", not counting the {apart} whose relevant evidence was not in the context either."
                     if apart else ".")
        else:
            line = f"Implicated: {factor}, in {top} of the {recovered} recovered failures."
        lines.append(line)
        lines += [f"Candidate experiment: {text}. {HYPOTHESIS}" for text in experiments]
    return lines

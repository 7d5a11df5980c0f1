"""The ``relevance_judge`` evaluator: an LLM grades each retrieved passage for the question.

Each passage of the last recorded ``retrieval/v1``, up to ``depth``, is graded 0 (does not help),
1 (partly) or 2 (answers the question) with a short rationale. Each grade is cached per (question,
passage text, judge identity) in the judgment cache, so a passage retrieved again for the same
question, by another case or another run, is not asked again. The prompt is a versioned pair of
files of this package; its version and text, the provider and the model are the judge's identity.

The judgment passes when any graded passage is relevant (grade > 0); its detail holds every
label. With ``relevance: {source: judge, judge: <this criterion>}`` in the suite, these labels
stand in for ``expected.relevant`` in the retrieval metrics for cases without human labels, and
every such number is marked ``judged``. docs/retrieval-metrics.md, docs/judges.md.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from oloproof import ConfigError, JudgeOptions, Judgment, LLMJudge, digest, hookimpl, json_objects, latest

GRADES = (0, 1, 2)
RATIONALE_CHARS = 300
RAW_CHARS = 2000


def _check_depth(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"depth must be a whole number >= 1, got {value!r}",
                          fix="write depth: 10 to grade the first ten retrieved passages", key="depth")


@frozen(kw_only=True)
class Options(JudgeOptions):
    depth: int = field(default=10, validator=_check_depth)  # how many retrieved passages to grade
    criterion: str | None = None  # None: judged_relevance


def parse_grade(text: str) -> tuple[int, str] | None:
    """``(grade, rationale)`` from a reply holding one JSON object with a grade 0, 1 or 2, else None."""
    found = json_objects(text, "grade")
    grades = {v["grade"] for v in found if not isinstance(v["grade"], bool) and v["grade"] in GRADES}
    if len(grades) != 1 or len(found) != len([v for v in found if v["grade"] in grades]):
        return None
    rationale = found[0].get("rationale", "")
    rationale = " ".join(rationale.split()) if isinstance(rationale, str) else ""
    if len(rationale) > RATIONALE_CHARS:
        rationale = rationale[:RATIONALE_CHARS - 1] + "…"
    return int(grades.pop()), rationale


class RelevanceJudge(LLMJudge):
    """Grade each retrieved passage (up to ``depth``) 0/1/2 for the case's question; pass when any
    graded passage is relevant."""

    type_name, family, default_criterion = "relevance_judge", "relevance", "judged_relevance"
    prompts = ("v1",)  # every version ever shipped stays
    reads = ("retrieval/v1",)
    relevance_judge = True  # its labels may stand in for expected.relevant (relevance.source: judge)

    def __init__(self, options: Options):
        super().__init__(options)
        self.cache: Any = None  # the judgment cache, bound by the runner (bind_cache)
        self._identity = digest(self.identity)

    def bind_cache(self, cache: Any) -> None:
        """The runner gives the judgment cache: ``get(key)`` and ``put(key, value)``."""
        self.cache = cache

    def grade(self, question: str, text: str) -> dict:
        """``{grade, rationale, usage}`` for one passage, from the cache when it was graded before;
        ``{raw}`` when the reply cannot be read (never cached)."""
        key = digest({"judge": self._identity, "question": question, "passage": text})
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return {**hit, "cached": True}
        reply = self.provider.complete(self.template.substitute(question=question, passage=text), system=self.system)
        reply_text = reply.text if isinstance(reply.text, str) else ""
        parsed = parse_grade(reply_text)
        usage = self.paid(reply)
        if parsed is None:
            return {"raw": reply_text[:RAW_CHARS], "usage": usage}
        graded = {"grade": parsed[0], "rationale": parsed[1]}
        if self.cache is not None:
            self.cache.put(key, graded)
        return {**graded, "usage": usage}

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        retrieval = latest(execution, "retrieval/v1")
        if retrieval is None:
            return Judgment.missing("no_retrieval_recorded")
        passages = list(retrieval.get("candidates", ()))[: self.options.depth]
        if any(not p.get("text") for p in passages):
            return Judgment.missing("retrieval_without_text")
        question = self.question(case)
        labels, usage, cached = [], {}, 0
        for passage in passages:
            graded = self.grade(question, passage["text"])
            for name, value in graded.pop("usage", {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    usage[name] = usage.get(name, 0) + value
            if "raw" in graded:
                return Judgment(status="missing", reason="judge_unparseable",
                                detail={"raw": graded["raw"], "doc_id": passage["doc_id"],
                                        "prompt_version": self.prompt_version, "usage": usage})
            cached += bool(graded.pop("cached", False))
            label = {"doc_id": passage["doc_id"], "grade": graded["grade"], "rationale": graded["rationale"]}
            if passage.get("chunk_id") is not None:
                label["chunk_id"] = passage["chunk_id"]
            labels.append(label)
        relevant = sum(1 for label in labels if label["grade"] > 0)
        detail = {"labels": labels, "graded": len(labels), "relevant": relevant, "cached_passages": cached,
                  "prompt_version": self.prompt_version, "usage": usage}
        return Judgment.of(relevant > 0, None if relevant else "no_relevant_passage_judged", **detail)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("relevance_judge", RelevanceJudge, options=Options)

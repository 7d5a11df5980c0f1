"""The ``rag`` system: a staged RAG class that Oloproof runs stage by stage.

``retrieve`` is cached by the retrieval identity (name, the code retrieve reaches, index_version,
depth, input) and ``generate`` by (the code generate reaches, input, the exact assembled context),
so a change to top_k, the budget or generation never re-runs retrieval. Context assembly is Oloproof's:
the first top_k candidates in the retriever's order, each kept while it fits the budget by the
system's own ``count_tokens``; the rest dropped with reason ``top_k`` or ``token_budget``.
``generate`` is given the kept items only (not the dropped list or the budget), so that its
cache key, which covers the items, covers everything it can read.
"""

from __future__ import annotations

import threading
from typing import Any

from attrs import frozen

from oloproof import (
    ArtifactError,
    ConfigError,
    Context,
    ContextItem,
    DroppedItem,
    OloproofError,
    Passage,
    Retrieval,
    digest,
    hookimpl,
    import_object,
    project_fingerprint,
    reach_fingerprint,
    retrieval_data,
    retrieval_from_data,
    short_fingerprint as short,
    takes_keyword,
)


@frozen(kw_only=True)
class Options:
    object: str  # "module:Class"
    depth: int | None = None
    top_k: int | None = None
    token_budget: int | None = None
    index_version: str | None = None
    citations_field: str | None = "citations"  # the output field recorded as citations/v1


def _setting(options: Options, info: Any, name: str) -> Any:
    value = getattr(options, name)
    return value if value is not None else getattr(info, name, None)


def _whole(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


class RagSystem:
    """Runs ``retrieve``, assembles the context, runs ``generate``; records all three artifacts.

    Interventions use the stages directly: ``retrieve``, ``assemble`` (with another top_k, or
    candidates a reranker reordered) and ``generate`` (with any context, uncached).
    """

    def __init__(self, options: Options, context: Any):
        try:
            cls = import_object(options.object)
        except OloproofError as exc:
            raise ConfigError(exc.problem, fix=exc.fix) from None
        info = getattr(cls, "__oloproof_rag_system__", None)
        self.depth = _setting(options, info, "depth")
        self.top_k = _setting(options, info, "top_k")
        if self.top_k is None:
            self.top_k = self.depth
        self.token_budget = _setting(options, info, "token_budget")
        self.index_version = _setting(options, info, "index_version")
        for name in ("retrieve", "generate"):
            if not callable(getattr(cls, name, None)):
                raise ConfigError(f"{options.object} has no {name}() method",
                                  fix="define retrieve(input, depth) and generate(input, context) "
                                      "(each may take history too: docs/conversations.md)")
        if not _whole(self.depth, 1):
            raise ConfigError(f"depth must be a whole number >= 1, got {self.depth!r}",
                              fix="set depth in @rag_system(...) or under system.rag")
        if not _whole(self.top_k, 1) or self.top_k > self.depth:
            raise ConfigError(f"top_k must be between 1 and depth ({self.depth}), got {self.top_k!r}",
                              fix="set top_k <= depth")
        if self.token_budget is not None and not _whole(self.token_budget, 0):
            raise ConfigError(f"token_budget must be a whole number >= 0, got {self.token_budget!r}",
                              fix="set token_budget to the tokens the context may hold, or remove it")
        if self.token_budget is not None and not callable(getattr(cls, "count_tokens", None)):
            raise ConfigError(f"token_budget is set, but {options.object} has no count_tokens(passage); "
                              "Oloproof never estimates tokens",
                              fix="define count_tokens(passage) -> int on the class, or remove token_budget")
        self.instance = cls()
        # a stage that names a `history` parameter is given a conversation's earlier turns
        self.takes_history = {stage: takes_keyword(getattr(self.instance, stage), "history")
                              for stage in ("retrieve", "generate")}
        self.object = options.object
        self.name = context.name or (info.name if info else cls.__name__)
        declared = context.version or (info.version if info else "0")
        roots = [context.project_dir]
        # each stage's code: what its method can reach (through self.<name> on this class, its
        # globals and imports, transitively), __init__ included as it builds the instance's state
        self.code = {stage: digest(reach_fingerprint([getattr(cls, stage), cls.__init__], roots, cls=cls))
                     for stage in ("retrieve", "generate", "count_tokens") if hasattr(cls, stage)}
        project = project_fingerprint(roots)
        self.identity = {"kind": "rag", "name": self.name, "version": declared, "object": options.object,
                         "depth": self.depth, "top_k": self.top_k, "token_budget": self.token_budget,
                         "index_version": self.index_version, "citations_field": options.citations_field,
                         "code": self.code, "project": project}
        # the recorded version covers every loaded project module and the packages they use; the
        # stage caches key on what each stage reaches, so editing generate never re-runs retrieval
        self.version = f"{declared}+{short([self.code, project])}"
        self.citations_field = options.citations_field
        self.records = frozenset({"retrieval/v1", "context/v1", "query_rewrite/v1"}
                                 | ({"citations/v1"} if options.citations_field else set()))
        self.cache = context.cache
        self._counts = {"retrieve": [0, 0], "generate": [0, 0]}
        self._lock = threading.Lock()

    # -- the stages -------------------------------------------------------------------------

    def _given(self, stage: str, case: Any) -> dict:
        """``history=[...]`` for a stage that declares a ``history`` parameter; nothing otherwise."""
        return {"history": case.history_data()} if self.takes_history[stage] else {}

    def _cached(self, stage: str, key: str, use_cache: bool) -> Any:
        found = self.cache.get(stage, key) if use_cache and self.cache is not None else None
        if use_cache:
            with self._lock:
                self._counts[stage][0 if found is not None else 1] += 1
        return found

    def retrieve(self, case: Any, use_cache: bool = True) -> Retrieval:
        key = digest({"name": self.name, "retrieve": self.code["retrieve"], "index_version": self.index_version,
                      "depth": self.depth, "input": case.input, **_trial(case), **_history(case)})
        found = self._cached("retrieve", key, use_cache)
        if found is not None:
            return retrieval_from_data(found)
        retrieval = self.instance.retrieve(case.input, self.depth, **self._given("retrieve", case))
        if not isinstance(retrieval, Retrieval):
            raise ArtifactError(f"retrieve returned {type(retrieval).__name__}, not a Retrieval",
                                fix="return Retrieval(query=..., depth=depth, candidates=(Passage(...), ...))")
        if len(retrieval.candidates) > self.depth:
            raise ArtifactError(f"retrieve returned {len(retrieval.candidates)} candidates for depth {self.depth}",
                                fix="return at most depth candidates")
        for i, passage in enumerate(retrieval.candidates):
            if not isinstance(passage, Passage):
                raise ArtifactError(f"retrieve returned candidates[{i}] = {passage!r}, not a Passage",
                                    fix="build each candidate as Passage(doc_id=..., score=..., text=...)")
        if self.cache is not None and use_cache:
            self.cache.put("retrieve", key, retrieval_data(retrieval))
        return retrieval

    def tokens(self, passage: Passage) -> int | None:
        """The system's own count, whenever it defines ``count_tokens``; Oloproof never estimates."""
        if "count_tokens" not in self.code:
            return None
        count = self.instance.count_tokens(passage)
        if not _whole(count, 0):
            raise ArtifactError(f"count_tokens returned {count!r} for {passage.doc_id}, not a whole number >= 0",
                                fix="return the passage's token count as an int, e.g. len(tokenizer.encode(text))")
        return count

    def assemble(self, retrieval: Retrieval, top_k: int | None = None,
                 candidates: tuple[Passage, ...] | None = None, token_budget: int | None = None) -> Context:
        """Keep the first top_k candidates in order, each while it fits the budget; never reorder.
        ``top_k`` and ``token_budget`` replace the system's own (a replay's)."""
        top_k = self.top_k if top_k is None else top_k
        budget = self.token_budget if token_budget is None else token_budget
        items, dropped, used = [], [], 0
        for position, passage in enumerate(candidates if candidates is not None else retrieval.candidates, 1):
            if position > top_k:
                dropped.append(DroppedItem(doc_id=passage.doc_id, position=position, reason="top_k",
                                           chunk_id=passage.chunk_id))
                continue
            tokens = self.tokens(passage)
            if budget is not None and used + tokens > budget:
                dropped.append(DroppedItem(doc_id=passage.doc_id, position=position, reason="token_budget",
                                           chunk_id=passage.chunk_id))
                continue
            used += tokens or 0
            items.append(ContextItem(doc_id=passage.doc_id, position=position, tokens=tokens, text=passage.text,
                                     chunk_id=passage.chunk_id))
        return Context(items=tuple(items), dropped=tuple(dropped), token_budget=budget)

    def generate(self, case: Any, context: Context, use_cache: bool = True) -> Any:
        # the dropped list and the budget stay out of the key, so generate is not given them
        given = Context(items=context.items, source=context.source)
        key = digest({"generate": self.code["generate"], "input": case.input, "context": given, **_trial(case),
                      **_history(case)})
        found = self._cached("generate", key, use_cache)
        if found is not None:
            return found["output"]
        output = self.instance.generate(case.input, given, **self._given("generate", case))
        if self.cache is not None and use_cache:
            self.cache.put("generate", key, {"output": output})
        return output

    def record(self, recorder: Any, retrieval: Retrieval | None, context: Context, output: Any) -> None:
        if retrieval is not None:
            recorder.retrieval(retrieval)
            if "conversation" in recorder.case.metadata:  # a conversation's turn: what it searched for
                recorder.record("query_rewrite/v1", {"query": retrieval.query})
        recorder.context(context)
        if self.citations_field:
            cited = output.get(self.citations_field) if isinstance(output, dict) else None
            recorder.citations(cited if cited is not None else [])

    def execute(self, case: Any, recorder: Any) -> Any:
        retrieval = self.retrieve(case)
        context = self.assemble(retrieval)
        output = self.generate(case, context)
        self.record(recorder, retrieval, context, output)
        return output

    def passages(self) -> list:
        """The index, for ``oloproof generate`` without ``--corpus``: the class's own
        ``passages()`` (Passages or ``{doc_id, chunk_id?, text}`` dicts)."""
        listed = getattr(self.instance, "passages", None)
        if not callable(listed):
            raise ConfigError(f"{self.object} has no passages() method, so its index cannot be listed",
                              fix="define passages() returning the index's passages, or give --corpus FILE")
        return list(listed())

    # -- what interventions call: every one bypasses the generate cache --------------------

    def rerun(self, case: Any, recorder: Any) -> Any:
        """Re-execute unchanged, generating afresh (a control)."""
        retrieval = self.retrieve(case)
        context = self.assemble(retrieval)
        output = self.generate(case, context, use_cache=False)
        self.record(recorder, retrieval, context, output)
        return output

    def generate_with(self, case: Any, context: Context, recorder: Any) -> Any:
        """Generate from a given context (the gold passages, say), without retrieving."""
        output = self.generate(case, context, use_cache=False)
        self.record(recorder, None, context, output)
        return output

    def replay(self, case: Any, record: dict, recorder: Any, top_k: int | None = None,
               rerank: Any = None, token_budget: int | None = None) -> Any:
        """Replay the run's recorded retrieval, never calling retrieve: reorder the candidates
        with ``rerank(input, candidates)`` if given, assemble with ``top_k`` and ``token_budget``
        (the system's own when None), generate afresh."""
        recorded = (record.get("artifacts") or {}).get("retrieval/v1")
        if not recorded:
            raise ArtifactError(f"case {case.id!r} has no recorded retrieval/v1 to replay")
        retrieval = retrieval_from_data(recorded[-1])
        candidates = None
        if rerank is not None:
            candidates = tuple(rerank(case.input, list(retrieval.candidates)))
            for i, passage in enumerate(candidates):
                if not isinstance(passage, Passage):
                    raise ArtifactError(f"the reranker returned {passage!r} at {i}, not a Passage")
        context = self.assemble(retrieval, top_k=top_k, candidates=candidates, token_budget=token_budget)
        output = self.generate(case, context, use_cache=False)
        self.record(recorder, retrieval if candidates is None else Retrieval(
            query=retrieval.query, depth=retrieval.depth, candidates=candidates), context, output)
        return output

    def stage_counts(self) -> dict:
        return {stage: tuple(counts) for stage, counts in self._counts.items()}


@hookimpl
def oloproof_register_systems(registry):
    registry.add("rag", RagSystem, options=Options, shorthand="object")


def _history(case: Any) -> dict:
    """A conversation's later turn: the history it was given is part of each stage's key."""
    return {"history": case.history_data()} if getattr(case, "history", ()) else {}


def _trial(case: Any) -> dict:
    """A later trial of a case (``trials:``) runs its stages afresh: its own stage cache keys."""
    trial = getattr(case, "trial", 0)
    return {"trial": trial} if trial else {}

"""Production traces, replayed: the cases ``oloproof cases from-traces`` wrote, run stage by stage.

``retrieve`` never searches: it returns the retrieval the production trace recorded
(``metadata.recorded_retrieval``), so ``oloproof diagnose --intervention top-k`` (or reranker,
token-budget) replays what production retrieved; ``generate`` is the application's model over the
context Oloproof assembles from it.
"""

from oloproof import Passage, Retrieval, current_case, rag_system

import server  # the application (and the blackbox_rag example's app.py) as the service runs it


@rag_system(name="support-rag-replay", version="tutorial", depth=6, top_k=2, token_budget=40)
class ProductionReplay:
    def retrieve(self, input, depth):
        recorded = current_case().case.metadata.get("recorded_retrieval") or {"candidates": []}
        return Retrieval(query=recorded.get("query"), depth=depth,
                         candidates=tuple(Passage(**p) for p in recorded["candidates"][:depth]))

    def generate(self, input, context):
        if not context.items:
            return {"answer": "I could not find that in the knowledge base.", "citations": []}
        first = context.items[0]
        return {"answer": server.app.answer_from(input["question"], first.text), "citations": [first.doc_id]}

    def count_tokens(self, passage):
        return len((passage.text or "").split())

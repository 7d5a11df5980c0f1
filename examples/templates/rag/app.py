"""Your staged RAG system: Oloproof runs ``retrieve``, assembles the context, then ``generate``.

Replace the bodies with your index and your model; keep the decorator and the signatures.
Oloproof keeps the first ``top_k`` candidates, drops what exceeds ``token_budget`` (counted by your
``count_tokens``), and hands the rest to ``generate``. docs/rag.md.
"""

from oloproof import Passage, Retrieval, rag_system

DOCUMENTS = {
    "doc-1": "Replace these documents with a call to your index.",
    "doc-2": "Each passage has a doc_id, a score and its text.",
}


@rag_system(name="my-rag", version="0.1", depth=5, top_k=2, token_budget=200, index_version="index-1")
class MyRag:
    def retrieve(self, input, depth):
        words = set(input["question"].lower().split())
        scored = sorted(((len(words & set(text.lower().split())), doc_id, text)
                         for doc_id, text in DOCUMENTS.items()), reverse=True)
        return Retrieval(query=input["question"], depth=depth,
                         candidates=tuple(Passage(doc_id=d, score=float(s), text=t) for s, d, t in scored[:depth]))

    def generate(self, input, context):
        best = context.items[0].text if context.items else "I could not find that."
        return {"answer": best, "citations": [item.doc_id for item in context.items[:1]]}

    def count_tokens(self, passage):
        return len((passage.text or "").split())  # use your model's tokenizer

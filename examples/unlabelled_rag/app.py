"""A staged RAG application over a corpus of 50 passages (``passages.jsonl``) with no labelled cases.

Deterministic stand-ins for a real retriever (keyword search over the passages) and a real model
(it answers with the sentence of the best passage that shares the most words with the question,
or abstains when no passage shares enough), so the example needs no credentials. ``passages()``
lists the index, so ``oloproof generate`` can read it without ``--corpus``.
"""

import json
import re
from pathlib import Path

from oloproof import Passage, Retrieval, rag_system

HERE = Path(__file__).resolve().parent
STOPWORDS = set("a an and are as at be by can do does for from how i in is it many my of on or the this to "
                "what when where which who why with our your we you".split())
ABSTENTION = "I don't know."


def load() -> list[dict]:
    return [json.loads(line) for line in (HERE / "passages.jsonl").read_text(encoding="utf-8").splitlines() if line]


def terms(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS}


@rag_system(name="unlabelled-rag", version="1", depth=6, top_k=3, index_version="passages-50")
class UnlabelledRag:
    def __init__(self):
        self.index = load()

    def passages(self):
        """The index, for `oloproof generate` without --corpus."""
        return [Passage(doc_id=p["doc_id"], chunk_id=p["chunk_id"], text=p["text"]) for p in self.index]

    def retrieve(self, input, depth):
        """Keyword search: the passages sharing the most word stems with the question, best first."""
        wanted = terms(input["question"])
        scored = [(len(wanted & terms(p["text"])), p["doc_id"], p["chunk_id"], p["text"]) for p in self.index]
        scored = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1], s[2]))[:depth]
        return Retrieval(query=input["question"], depth=depth, candidates=tuple(
            Passage(doc_id=d, chunk_id=c, score=float(n), text=t) for n, d, c, t in scored))

    def generate(self, input, context):
        """The model: the best-matching sentence of the context; abstains below two shared stems."""
        wanted = terms(input["question"])
        sentences = [(len(wanted & terms(s)), s) for item in context.items
                     for s in re.split(r"(?<=\.) ", item.text or "")]
        best = max(sentences, default=(0, ""), key=lambda pair: pair[0])
        return {"answer": best[1] if best[0] >= 2 else ABSTENTION}

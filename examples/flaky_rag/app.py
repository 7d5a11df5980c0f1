"""A seeded nondeterministic RAG application: the same question can get a different answer from
one call to the next, as a model sampled at a temperature above zero does.

Retrieval is a deterministic keyword search over a small knowledge base. Generation answers from
the first passage of the context, except that it "loses the thread" (answers "I am not sure.")
with a chance that depends on the passage: the passages in ``HARD`` are misread more often.
Every draw comes from ``random.Random(f"{SEED}:{question}:{trial}")``, where ``trial`` is which of
the run's ``trials:`` executions this is (``current_case().trial``), so a run is reproducible:
``SEED = 16`` documents it, and changing it changes every answer.

``SteadyRag`` is the same application at a lower temperature (the candidate of the comparison in
docs/statistics.md): it misreads a passage less often.
"""

import random
import re

from oloproof import Passage, Retrieval, current_case, rag_system

SEED = 16

KNOWLEDGE_BASE = {
    "kb-refunds": "Refunds for annual plans are issued within 14 days by bank transfer.",
    "kb-seats": "Team plans include five seats and extra seats cost 8 euros a month.",
    "kb-hours": "Support answers on weekdays from 09:00 to 17:00 CET by chat.",
    "kb-sso": "Single sign-on supports Okta and Azure AD through SAML.",
    "kb-export": "Account data can be exported as CSV files from the settings page.",
    "kb-limits": "The API rate limit is 100 requests per minute for each key.",
    "kb-trial": "The free trial lasts 30 days and needs no card.",
    "kb-webhooks": "Webhooks retry a failed delivery three times with a growing delay.",
}
# the chance that generation misreads the passage, per passage (the rest: MISREAD)
HARD = {"kb-seats": 0.35, "kb-sso": 0.5, "kb-webhooks": 0.25}
MISREAD = 0.05

STOPWORDS = set("a an and are as at be by can do does for from how i in is it many my of on or the this to "
                "what when where which who why with".split())


def terms(text):
    return {w for w in re.findall(r"[a-z0-9:-]+", text.lower()) if w not in STOPWORDS}


@rag_system(name="flaky-rag", version="1", depth=4, top_k=1)
class FlakyRag:
    temperature = 1.0  # scales every misreading chance

    def retrieve(self, input, depth):
        """Keyword search: the passages sharing the most terms with the question, best first."""
        wanted = terms(input["question"])
        scored = [(len(wanted & terms(text)), doc_id, text) for doc_id, text in KNOWLEDGE_BASE.items()]
        scored = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        passages = [Passage(doc_id=doc_id, score=float(score), text=text) for score, doc_id, text in scored[:depth]]
        return Retrieval(query=input["question"], depth=depth, candidates=tuple(passages))

    def generate(self, input, context):
        """The model: the first passage of the context, unless this draw misreads it."""
        if not context.items:
            return {"answer": "I could not find that in the knowledge base."}
        best = context.items[0]
        draw = random.Random(f"{SEED}:{input['question']}:{current_case().trial}").random()
        if draw < self.temperature * HARD.get(best.doc_id, MISREAD):
            return {"answer": "I am not sure."}
        return {"answer": best.text}


@rag_system(name="flaky-rag", version="2-steady", depth=4, top_k=1)
class SteadyRag(FlakyRag):
    temperature = 0.2

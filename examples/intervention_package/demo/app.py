"""A small staged help-desk assistant: keyword retrieval over six passages, and a model that
answers with the best-matching sentence of the first passage it is given.

Deterministic, so the demo needs no credentials. Two questions use words the knowledge base
does not ("money back", "yearly", "receipts"), so their retrieval finds nothing.
"""

import re

from oloproof import Passage, Retrieval, rag_system

KNOWLEDGE_BASE = {
    "kb-refunds": "Refunds for annual plans are issued within 14 days of an approved request.",
    "kb-invoices": "Invoices can be downloaded as PDF files from the billing page.",
    "kb-seats": "Team plans include five seats.",
    "kb-sso": "Single sign-on supports Okta and Azure AD.",
    "kb-trial": "The free trial lasts 30 days and needs no card.",
    "kb-export": "Account data can be exported as CSV files from the settings page.",
}
STOPWORDS = set("a an and are as at be by can do does for from get how i in is it long many my of on or "
                "the to until what when where which with".split())


def terms(text):
    return {w for w in re.findall(r"[a-z0-9-]+", text.lower()) if w not in STOPWORDS}


@rag_system(name="help-desk", version="1", depth=3, top_k=2, token_budget=60, index_version="kb-1")
class HelpDesk:
    def retrieve(self, input, depth):
        wanted = terms(input["question"])
        scored = sorted(((len(wanted & terms(text)), doc_id, text) for doc_id, text in KNOWLEDGE_BASE.items()),
                        key=lambda s: (-s[0], s[1]))
        return Retrieval(query=input["question"], depth=depth, candidates=tuple(
            Passage(doc_id=doc_id, score=float(score), text=text) for score, doc_id, text in scored[:depth]
            if score > 0))

    def generate(self, input, context):
        if not context.items:
            return {"answer": "I could not find that.", "citations": []}
        return {"answer": context.items[0].text, "citations": [context.items[0].doc_id]}

    def count_tokens(self, passage):
        return len((passage.text or "").split())

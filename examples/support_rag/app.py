"""The tutorial's staged RAG application: a retrieval stage and a generation stage.

Deterministic stand-ins for a real retriever (keyword search over a small knowledge base) and a
real model (it answers with the sentence of the first passage that best matches the question),
so the example needs no credentials. Replace the bodies of ``retrieve`` and ``generate`` with
calls to your index and your model; keep the decorator and the signatures.
"""

import re

from oloproof import Passage, Retrieval, rag_system

KNOWLEDGE_BASE = {
    "kb-01": "Refunds for annual plans are issued within 14 days of an approved request. "
             "Support reviews each request on the same business day, and the customer is told by email "
             "as soon as the decision is made.",
    "kb-02": "Invoices for every plan can be downloaded as PDF files from the billing page.",
    "kb-03": "Team plans include five seats. Additional seats can be added from the billing page at any time.",
    "kb-04": "Security reviews for Enterprise customers cover a penetration test report, the data processing "
             "agreement and a questionnaire answered by the security team within ten business days, with a "
             "follow-up call booked for any open finding.",
    "kb-05": "Seats on a team plan can be reassigned by an admin from the members page.",
    "kb-06": "Support office hours are 09:00 to 17:00 CET on weekdays.",
    "kb-07": "Password resets are requested from the sign-in page, which sends a reset link by email.",
    "kb-08": "Account data can be exported as CSV files from the settings page.",
    "kb-09": "Every refund request on an annual plan is logged in the audit trail, and the same request is "
             "listed again on the day it was reviewed and approved.",
    "kb-10": "Security reviews during Enterprise onboarding include an access review and a written summary for "
             "the customer, and every review is scheduled with the security team of the customer.",
    "kb-11": "Single sign-on supports Okta and Azure AD through SAML.",
    "kb-12": "Data is encrypted at rest with AES-256.",
    "kb-13": "The API rate limit is 100 requests per minute for each key.",
    "kb-14": "Webhooks retry a failed delivery three times with a growing delay.",
    "kb-15": "The free trial lasts 30 days and needs no card.",
    "kb-16": "The Slack integration posts a message for every new ticket.",
}

STOPWORDS = set("a an and are as at be by can do does for from how i in is it many my of on or the this to "
                "what when where which who why with".split())


def terms(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9:-]+", text.lower()) if w not in STOPWORDS}


@rag_system(
    name="support-rag",
    version="slice-b-example",
    depth=6,
    top_k=2,
    token_budget=40,
    index_version="kb-2026-09-16",
)
class SupportRag:
    def retrieve(self, input, depth):
        """Keyword search: the passages sharing the most terms with the question, best first."""
        wanted = terms(input["question"])
        scored = [(len(wanted & terms(text)), doc_id, text) for doc_id, text in KNOWLEDGE_BASE.items()]
        scored = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        passages = [Passage(doc_id=doc_id, score=float(score), text=text) for score, doc_id, text in scored[:depth]]
        return Retrieval(query=input["question"], depth=depth, candidates=tuple(passages))

    def generate(self, input, context):
        """The model: answers from the first passage of the context, and cites it."""
        if not context.items:
            return {"answer": "I could not find that in the knowledge base.", "citations": []}
        best = context.items[0]
        sentences = re.split(r"(?<=\.) ", best.text or "")
        wanted = terms(input["question"])
        answer = max(sentences, key=lambda s: len(wanted & terms(s)))
        return {"answer": answer, "citations": [best.doc_id]}

    def count_tokens(self, passage):
        return len((passage.text or "").split())

"""The support assistant behind HTTP: ``python service.py 8767``.

POST /chat with the turn's input as the JSON body and, from the second turn of a conversation on,
the conversation so far under ``history``, each entry ``{"input": ..., "output": ...}``:

    {"question": "And for annual plans?",
     "history": [{"input": {"question": "How long does a refund take on a monthly plan?"},
                  "output": {"answer": "...", "citations": ["kb-01"]}}]}

The response carries the answer under ``result`` and, as a service's debug field would, what
Oloproof records: ``evidence.retrieval``, ``evidence.context``, ``evidence.citations`` and
``evidence.query_rewrite`` (the query the rewritten follow-up searched for). It runs the same
``SupportChat`` as ``oloproof.yaml``, with the same depth, top-k and token budget, and fills the
context the way Oloproof does for a staged system, so both give the same numbers.
"""

import sys

from aiohttp import web

import app
from oloproof import Context, ContextItem

SETTINGS = app.SupportChat.__oloproof_rag_system__
CHAT = app.SupportChat()


def assemble(candidates) -> dict:
    """The first top_k candidates in order, each kept while it fits the token budget."""
    items, dropped, used = [], [], 0
    for position, passage in enumerate(candidates, 1):
        tokens = CHAT.count_tokens(passage)
        if position > SETTINGS.top_k:
            dropped.append({"doc_id": passage.doc_id, "position": position, "reason": "top_k"})
        elif used + tokens > SETTINGS.token_budget:
            dropped.append({"doc_id": passage.doc_id, "position": position, "reason": "token_budget"})
        else:
            used += tokens
            items.append({"doc_id": passage.doc_id, "position": position, "tokens": tokens, "text": passage.text})
    return {"items": items, "dropped": dropped, "token_budget": SETTINGS.token_budget}


def answer(question: str, history: list) -> dict:
    """Retrieve with the conversation, fill the context, generate: the response body."""
    turn = {"question": question}
    retrieval = CHAT.retrieve(turn, SETTINGS.depth, history=history)
    context = assemble(retrieval.candidates)
    given = Context(items=tuple(ContextItem(**item) for item in context["items"]))
    output = CHAT.generate(turn, given, history=history)
    return {"result": output,
            "evidence": {"retrieval": {"query": retrieval.query, "depth": retrieval.depth,
                                       "candidates": [{"doc_id": p.doc_id, "score": p.score, "text": p.text}
                                                      for p in retrieval.candidates]},
                         "context": context,
                         "citations": {"ids": output["citations"]},
                         "query_rewrite": {"query": retrieval.query}}}


async def chat(request: web.Request) -> web.Response:
    try:
        body = await request.json()
        question, history = body["question"], body.get("history", [])
        if not isinstance(question, str) or not isinstance(history, list) or not all(
                isinstance(turn, dict) and isinstance(turn.get("input"), dict) for turn in history):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return web.json_response({"error": 'send {"question": "...", "history": [{"input": ..., "output": ...}]}'},
                                 status=400)
    return web.json_response(answer(question, history))


def make_app() -> web.Application:
    service = web.Application()
    service.router.add_post("/chat", chat)
    return service


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8767
    print(f"serving on http://127.0.0.1:{port}/chat", flush=True)
    web.run_app(make_app(), host="127.0.0.1", port=port, print=None)

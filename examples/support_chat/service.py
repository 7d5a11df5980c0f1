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

As a debugging override: ``override.passages`` in the body (a list of ``{doc_id, text}``) is the
context, with no search. ``oloproof.http.yaml`` declares it under ``interventions:``, so diagnose
can hand a turn its gold passages, with the conversation recorded in the run as its history.
"""

import sys

from aiohttp import web

import app
from oloproof import Context, ContextItem, Retrieval

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


def answer(question: str, history: list, passages: list | None = None) -> dict:
    """Retrieve with the conversation, fill the context, generate: the response body. Given
    ``passages``, they are the context and nothing is retrieved."""
    turn = {"question": question}
    if passages is None:
        retrieval = CHAT.retrieve(turn, SETTINGS.depth, history=history)
        context = assemble(retrieval.candidates)
    else:
        retrieval = Retrieval(query=app.rewrite(question, history), depth=SETTINGS.depth, candidates=())
        context = {"items": [{"doc_id": p["doc_id"], "position": position, "tokens": len(p["text"].split()),
                              "text": p["text"]} for position, p in enumerate(passages, 1)],
                   "dropped": [], "source": "override"}
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
        passages = (body.get("override") or {}).get("passages")
        if not isinstance(question, str) or not isinstance(history, list) or not all(
                isinstance(turn, dict) and isinstance(turn.get("input"), dict) for turn in history):
            raise TypeError
        if passages is not None and not all(isinstance(p, dict) and isinstance(p.get("text"), str)
                                            and isinstance(p.get("doc_id"), str) for p in passages):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        return web.json_response({"error": 'send {"question": "...", "history": [{"input": ..., "output": ...}], '
                                           '"override": {"passages": [{"doc_id": ..., "text": ...}]}}'}, status=400)
    return web.json_response(answer(question, history, passages))


def make_app() -> web.Application:
    service = web.Application()
    service.router.add_post("/chat", chat)
    return service


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8767
    print(f"serving on http://127.0.0.1:{port}/chat", flush=True)
    web.run_app(make_app(), host="127.0.0.1", port=port, print=None)

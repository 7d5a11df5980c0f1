"""The tutorial application behind HTTP: ``python server.py 8766``.

POST /answer with the case input as the JSON body, e.g. {"question": "..."}. The response carries
the answer under ``result`` and, as a service's debug field would, the evidence Oloproof records:
``evidence.retrieval``, ``evidence.context`` and ``evidence.citations``.

As a debugging override: ``override.passages`` in the body (a list of ``{doc_id, text}``) is the
prompt's context, with no search; ``override.top_k`` in the body and the ``X-Word-Budget`` header
replace the application's top-k and word budget for that request. ``oloproof.http.yaml`` declares
them under ``interventions:``, so diagnose can re-execute cases through them.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import app


def evidence(question: str, response: dict, word_budget: int) -> dict:
    return {
        "retrieval": {
            "query": question,
            "depth": app.SEARCH_DEPTH,
            "candidates": [{"doc_id": s["id"], "score": s["score"], "text": s["text"]} for s in response["sources"]],
        },
        "context": {
            "items": [{"doc_id": i["id"], "position": i["rank"], "tokens": i["tokens"], "text": i["text"]}
                      for i in response["prompt_sources"]],
            "dropped": [{"doc_id": i["id"], "position": i["rank"], "reason": i["why"]} for i in response["skipped"]],
            "token_budget": word_budget,
            "source": "override" if not response["sources"] and response["prompt_sources"] else "retrieval",
        },
        "citations": {"ids": response["cited"]},
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        if self.path != "/answer":
            return self.reply(404, {"error": "not found"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            question = str(body["question"])
            passages, top_k, word_budget = app.override_of(body, self.headers.get("X-Word-Budget"))
        except (ValueError, KeyError, TypeError, AttributeError):
            return self.reply(400, {"error": 'send {"question": "..."}'})
        response = app.support_api(question, passages=passages, top_k=top_k, word_budget=word_budget)
        self.reply(200, {"result": {"answer": response["answer"], "citations": response["cited"]},
                         "evidence": evidence(question, response, word_budget)})

    def reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # quiet: one line per request is noise here
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8766
    ThreadingHTTPServer.request_queue_size = 64  # many clients connect at once
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"serving on http://127.0.0.1:{port}/answer", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass

"""Your system under test: Oloproof calls ``run`` with each case's ``input``.

Replace the body with a call to your model, chain or agent; keep the decorator and return a dict
whose ``answer`` the evaluators in oloproof.yaml read. Record what your retriever returned and the
context you built with ``current_case()`` (see docs/concepts.md) to measure those stages too.
"""

from oloproof import system


@system(name="my-system", version="0.1")
def run(input):
    question = input["question"]
    return {"answer": f"TODO: answer {question!r}"}

"""The ``replay`` provider: replies read from a file, to try judges, generators and embeddings
with no key and no network.

Not a model. Each line of the replies file (JSONL) is ``{"match": "text", "verdict": "pass" |
"fail", "rationale": "..."}``; the first line whose ``match`` occurs in the prompt gives the reply
(``match`` may be a list: every item must occur). For a relevance judge a line gives ``"grade": 0 |
1 | 2`` instead of a verdict; for a claim-level judge's split, ``"claims": [...]``, and its claim
verdicts may name the supporting ``"passage"``; for a generator, ``"reply": {...}`` (an object, sent
as JSON, or a text, sent as it is); for embeddings, ``"embedding": [numbers]``, the vector of every
text the match occurs in. A prompt that no line matches gets the ``default`` verdict when one is
set, else a reply no judge can parse, so the judgment is missing (``judge_unparseable``), never a
silent pass; a text no embedding line matches is an error (``replay_no_embedding``). Every rationale
says it was replayed. The file's sha256 is part of the identity: editing the file misses the
judgment cache. docs/judges.md.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from attrs import frozen

from oloproof import ConfigError, Embeddings, EvaluationError, Reply, hookimpl

SHAPE = ('expected {"match": text or [texts]} with "verdict": "pass" or "fail" ("passage": a passage id, '
         'optional), "grade": 0, 1 or 2 (a relevance judge), "claims": [texts] (a claim-level judge\'s split), '
         '"reply": an object or a text (a generator), or "embedding": [numbers]')


@frozen(kw_only=True)
class Options:
    model: str  # a label for the runs that use it (``replay``); no model is called
    file: str  # the replies, JSONL, relative to the directory the command runs in
    default: str | None = None  # "pass" or "fail" for a prompt no line matches; None: unparseable


def _said(row: dict) -> dict | list | None:
    """What one line replies with, or None when it has no valid reply."""
    grade, claims, passage = row.get("grade"), row.get("claims"), row.get("passage")
    if row.get("verdict") in ("pass", "fail"):
        if passage is not None and not isinstance(passage, str):
            return None
        return {"verdict": row["verdict"], **({"passage": passage} if passage is not None else {})}
    if "grade" in row and not isinstance(grade, bool) and grade in (0, 1, 2):
        return {"grade": grade}
    if isinstance(claims, list) and all(isinstance(c, str) for c in claims):
        return {"claims": claims}
    if isinstance(row.get("reply"), (dict, str)):
        return {"reply": row["reply"]}
    vector = row.get("embedding")
    if (isinstance(vector, list) and vector
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector)):
        return {"embedding": [float(x) for x in vector]}
    return None


class ReplayProvider:
    """Replies from a file; usage is empty (nothing is spent)."""

    name = "replay"

    def __init__(self, options: Options):
        path = Path(options.file)
        if options.default not in (None, "pass", "fail"):
            raise ConfigError(f"default must be pass or fail, got {options.default!r}",
                              fix="write default: fail, or remove it")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the replies file {options.file!r}: {exc.strerror or exc}",
                              fix="write it: one JSON object a line, {\"match\": ..., \"verdict\": ...}") from None
        self.rules: list[tuple[tuple[str, ...], dict, str]] = []
        for number, line in enumerate(data.decode("utf-8", errors="strict").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{options.file}:{number}"
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"{where}: not JSON: {exc}", fix="write one JSON object a line") from None
            match = row.get("match") if isinstance(row, dict) else None
            match = [match] if isinstance(match, str) else match
            said = _said(row) if isinstance(row, dict) else None
            if not match or not all(isinstance(m, str) and m for m in match) or said is None:
                raise ConfigError(f"{where}: {SHAPE}", fix='e.g. {"match": "14 days", "verdict": "pass", "rationale": "..."}')
            self.rules.append((tuple(match), said, str(row.get("rationale") or "")))
        self.file, self.default = options.file, options.default
        self.identity = {"replies_sha256": hashlib.sha256(data).hexdigest(), "default": options.default}

    def complete(self, prompt: str, *, system: str | None = None) -> Reply:
        for match, said, rationale in self.rules:
            if "embedding" in said or not all(m in prompt for m in match):
                continue
            if "reply" in said:
                reply = said["reply"]
                return Reply(text=reply if isinstance(reply, str) else json.dumps(reply), usage={})
            note = f"replayed from {self.file}, not a model" + (f": {rationale}" if rationale else "")
            return Reply(text=json.dumps({**said, "rationale": note}), usage={})
        if self.default is not None:
            note = f"replayed default of {self.file}, not a model: no line matched"
            return Reply(text=json.dumps({"verdict": self.default, "rationale": note}), usage={})
        return Reply(text=f"(replay: no line of {self.file} matches this prompt)", usage={})

    def embed(self, texts: list[str]) -> Embeddings:
        """The vector of the first ``embedding`` line whose match occurs in each text."""
        vectors = []
        for text in texts:
            found = next((said["embedding"] for match, said, _ in self.rules
                          if "embedding" in said and all(m in text for m in match)), None)
            if found is None:
                raise EvaluationError(f"replay_no_embedding: no embedding line of {self.file} matches {text[:60]!r}")
            vectors.append(tuple(found))
        return Embeddings(vectors=tuple(vectors), usage={})


@hookimpl
def oloproof_register_providers(registry):
    registry.add("replay", ReplayProvider, options=Options)

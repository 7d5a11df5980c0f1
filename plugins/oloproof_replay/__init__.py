"""The ``replay`` provider: verdicts read from a file, to try judges with no key and no network.

Not a model. Each line of the replies file (JSONL) is ``{"match": "text", "verdict": "pass" |
"fail", "rationale": "..."}``; the first line whose ``match`` occurs in the judge's prompt gives
the reply (``match`` may be a list: every item must occur). For a relevance judge a line gives
``"grade": 0 | 1 | 2`` instead of a verdict; for a claim-level judge's split, ``"claims": [...]``,
and its claim verdicts may name the supporting ``"passage"``. A prompt that no line matches gets the
``default`` verdict when one is set, else a reply no judge can parse, so the judgment is missing
(``judge_unparseable``), never a silent pass. Every rationale says it was replayed. The file's
sha256 is part of the judge's identity: editing the file misses the judgment cache. docs/judges.md.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from attrs import frozen

from oloproof import ConfigError, Reply, hookimpl


@frozen(kw_only=True)
class Options:
    model: str  # a label for the runs that use it (``replay``); no model is called
    file: str  # the replies, JSONL, relative to the directory the command runs in
    default: str | None = None  # "pass" or "fail" for a prompt no line matches; None: unparseable


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
            grade = row.get("grade") if isinstance(row, dict) else None
            claims = row.get("claims") if isinstance(row, dict) else None
            passage = row.get("passage") if isinstance(row, dict) else None
            if (not match or not all(isinstance(m, str) and m for m in match)
                    or (row.get("verdict") not in ("pass", "fail") and (isinstance(grade, bool) or grade not in (0, 1, 2))
                        and not (isinstance(claims, list) and all(isinstance(c, str) for c in claims)))
                    or (passage is not None and not isinstance(passage, str))):
                raise ConfigError(f"{where}: expected {{\"match\": text or [texts], \"verdict\": \"pass\" or \"fail\"}} "
                                  "(or \"grade\": 0, 1 or 2 for a relevance judge, or \"claims\": [texts] for a "
                                  "claim-level judge's split; \"passage\" a passage id)",
                                  fix='e.g. {"match": "14 days", "verdict": "pass", "rationale": "..."}')
            said = ({"claims": claims} if isinstance(claims, list) and "verdict" not in row and grade is None
                    else {"grade": grade} if grade is not None and "verdict" not in row
                    else {"verdict": row["verdict"], **({"passage": passage} if passage is not None else {})})
            self.rules.append((tuple(match), said, str(row.get("rationale") or "")))
        self.file, self.default = options.file, options.default
        self.identity = {"replies_sha256": hashlib.sha256(data).hexdigest(), "default": options.default}

    def complete(self, prompt: str, *, system: str | None = None) -> Reply:
        for match, said, rationale in self.rules:
            if all(m in prompt for m in match):
                note = f"replayed from {self.file}, not a model" + (f": {rationale}" if rationale else "")
                return Reply(text=json.dumps({**said, "rationale": note}), usage={})
        if self.default is not None:
            note = f"replayed default of {self.file}, not a model: no line matched"
            return Reply(text=json.dumps({"verdict": self.default, "rationale": note}), usage={})
        return Reply(text=f"(replay: no line of {self.file} matches this prompt)", usage={})


@hookimpl
def oloproof_register_providers(registry):
    registry.add("replay", ReplayProvider, options=Options)

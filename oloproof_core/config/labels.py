"""A human labels file: one JSON object a line, ``{"id": "c001", "label": true}``, read by
``oloproof judge validate`` and, named in a policy's ``labels:``, by the gate's human-level interval.

``label`` is true or "pass" when the human says the criterion holds, false or "fail" otherwise;
``output`` with ``artifacts`` (judge this output instead of a run's) and ``note`` are optional.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attrs import frozen

from oloproof_core.config.documents import read_jsonl
from oloproof_core.model.errors import ConfigError

LABEL_KEYS = ("id", "label", "output", "artifacts", "note")
LABEL_WORDS = {True: True, False: False, "pass": True, "fail": False}


@frozen(kw_only=True)
class Label:
    """One human label: the case, the human's verdict, and optionally the output to judge."""

    id: str
    label: bool
    where: str  # "human_labels.jsonl:7"
    output: Any = None
    artifacts: dict | None = None
    has_output: bool = False


def load_labels(path: Path) -> list[Label]:
    """Read a labels file, one object a line; every problem names its line and the fix."""
    labels: list[Label] = []
    for where, obj in read_jsonl(path, what="labels", keys=LABEL_KEYS, example='{"id": "c001", "label": true}',
                                 missing_fix='write one line per case: {"id": "c001", "label": true}'):
        if "label" not in obj:
            raise ConfigError("$.label: missing label", where=where, fix='write {"id": "c001", "label": true}')
        value = obj["label"]
        if isinstance(value, str):
            value = value.strip().casefold()
        if not isinstance(value, (bool, str)) or value not in LABEL_WORDS:
            raise ConfigError(f"label must be true/false or \"pass\"/\"fail\", got {obj['label']!r}", where=where,
                              fix="write true when the criterion holds for the case, false when it does not")
        artifacts = obj.get("artifacts")
        if artifacts is not None and ("output" not in obj or not isinstance(artifacts, dict)):
            raise ConfigError("artifacts must be an object of lists, given beside output", where=where,
                              fix='write "output": {...}, "artifacts": {"context/v1": [{...}]}')
        labels.append(Label(id=obj["id"], label=LABEL_WORDS[value], where=where, output=obj.get("output"),
                            artifacts=artifacts, has_output="output" in obj))
    return labels

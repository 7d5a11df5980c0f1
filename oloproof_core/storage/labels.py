"""Human labels and label plans kept in the store, as objects of kind ``label`` and ``label_plan``.

A label records who (``labeller``), when (``at``), the run, case and criterion it was made on, the
verdict (``pass``, ``fail`` or ``skip``), a note, and the digest of the answer it judged
(``execution``: the output and artifacts), so that it applies to that very answer in any later run
and to no other. The latest label of a (criterion, case, answer) wins. Exported and imported as
JSONL, one label a line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from oloproof_core.model.errors import ConfigError
from oloproof_core.model.identity import digest

VERDICTS = ("pass", "fail", "skip")
LABEL_FIELDS = ("run", "case", "criterion", "verdict", "execution", "labeller", "at", "note")


def execution_digest(record: Mapping[str, Any]) -> str:
    """The digest of the answer a case record (or an ``Execution.to_data()``) holds: its output
    and artifacts, nothing else."""
    return digest({"output": record.get("output"), "artifacts": record.get("artifacts") or {}})


def labeller_name(given: str | None = None) -> str:
    """``given``, else ``git config user.name``, else the login name."""
    if given:
        return given
    import getpass
    import subprocess

    try:
        name = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    return name or getpass.getuser()


def make_label(run: str, case: str, criterion: str, verdict: str, execution: str, labeller: str,
               note: str = "", at: str | None = None) -> dict:
    if verdict not in VERDICTS:
        raise ConfigError(f"a label is pass, fail or skip, got {verdict!r}", fix="label pass, fail or skip")
    return {"kind": "label", "run": run, "case": case, "criterion": criterion, "verdict": verdict,
            "execution": execution, "labeller": labeller, "note": note,
            "at": at or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def put_labels(store: Any, records: Iterable[dict]) -> int:
    """Store labels; returns how many were new (the same record twice is one object)."""
    known = {object_id for object_id, _ in store.list_objects("label")}
    count = 0
    for record in records:
        object_id = "sha256:" + digest(record)
        if object_id not in known:
            store.put_object("label", object_id, record)
            known.add(object_id)
            count += 1
    return count


def stored_labels(store: Any, criterion: str | None = None) -> dict[tuple[str, str, str], dict]:
    """The latest label of each (criterion, case, execution digest), skips included."""
    latest: dict[tuple[str, str, str], dict] = {}
    for _, record in store.list_objects("label"):
        if criterion is None or record.get("criterion") == criterion:
            latest[(record["criterion"], record["case"], record["execution"])] = record
    return latest


def export_labels(store: Any, path: Path) -> int:
    records = [record for _, record in store.list_objects("label")]
    path.write_text("".join(json.dumps({k: r.get(k) for k in LABEL_FIELDS}, sort_keys=True) + "\n" for r in records),
                    encoding="utf-8")
    return len(records)


def import_labels(store: Any, path: Path) -> int:
    """Read an export (one label a line); every line must carry every field."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not JSON: {exc.msg}", where=f"{path.name}:{number}",
                              fix="import a file written by `oloproof label export`") from None
        absent = [k for k in LABEL_FIELDS if not isinstance(obj, dict) or k not in obj]
        if absent:
            raise ConfigError(f"a label line needs {', '.join(absent)}", where=f"{path.name}:{number}",
                              fix="import a file written by `oloproof label export`")
        records.append(make_label(obj["run"], obj["case"], obj["criterion"], obj["verdict"], obj["execution"],
                                  obj["labeller"], obj.get("note") or "", obj["at"]))
    return put_labels(store, records)


def latest_plan(store: Any, run: str, criterion: str | None = None) -> tuple[str, dict] | None:
    """The newest label plan stored for ``run`` (and ``criterion``)."""
    found = None
    for object_id, record in store.list_objects("label_plan"):
        if record.get("run") == run and (criterion is None or record.get("criterion") == criterion):
            found = (object_id, record)
    return found

"""The ``jsonfolder`` store: runs, case records, cache values and objects as JSON files in a folder.

``store: {type: jsonfolder, path: .oloproof-json}`` in oloproof.yaml (the path is relative to the
project). Every file is written under a temporary name and renamed into place, so no reader sees
half of one; a file that must be written once (a run's ``run.json``, an object) is linked into
place, which fails when it is there already. Nothing is fsynced: a power cut may lose or damage
the last writes (`oloproof store check` finds the damage)::

    runs/<run id>/writer.json              the writer (host, pid, start) while the run is written
    runs/<run id>/cases-<first idx>.json   one chunk of case rows a call of add(): [idx, case id, record, checksum]
    runs/<run id>/run.json                 header, summary and seal: the run is visible once it exists
    cache/<namespace>/<sha256 of key>.json the key, the value's JSON text and its checksum
    objects/<id>.json                      the id, kind, creation time, record text and its checksum
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from urllib.parse import quote, unquote

from attrs import frozen

from oloproof import (ConfigError, OloproofError, RunWriter, check_rows, checked_case, checksum, damaged_run, hookimpl,
                      process_gone, seal_intact, sealed_records, this_process, write_run)

FIX = "run `oloproof store check` to see everything damaged"


@frozen(kw_only=True)
class Options:
    path: str = ".oloproof-json"  # the folder, relative to the project


def _write(path: Path, data: object, once: bool = False) -> bool:
    """Write ``data`` as JSON to ``path`` atomically; with ``once``, only if no file is there (False then)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False)
        if once:
            os.link(tmp, path)  # FileExistsError when the file is there
        else:
            os.replace(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        if os.path.exists(tmp):  # renamed away, or linked (then this name is a second one)
            os.unlink(tmp)


def _read(path: Path) -> object | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


class JsonFolderStore:
    """Runs, caches and objects as JSON files under ``<project>/<path>``; ``read_only = True`` refuses writes."""

    def __init__(self, options: Options | None, project_dir: Path):
        self.options = options or Options()
        self.path = Path(project_dir) / self.options.path
        self.read_only = False
        self.damaged: dict[str, int] = {}  # cache namespace -> values that failed their checksum

    @property
    def shown(self) -> str:
        return f"jsonfolder {self.options.path}"

    def _writable(self) -> None:
        if self.read_only:
            raise OloproofError("the store is open read-only", where=self.shown, fix="run a command that writes")

    def _run_dir(self, run_id: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", run_id):
            raise ConfigError(f"no run {run_id}", fix="list the runs with `oloproof runs`")
        return self.path / "runs" / run_id

    def _run_dirs(self) -> list[Path]:
        return sorted(p for p in (self.path / "runs").glob("*") if p.is_dir())

    # -- runs ------------------------------------------------------------------------

    def begin_run(self, run_id: str) -> FolderWriter:
        """A writer for a new run; first the rows of runs whose writing process has ended are removed."""
        self._writable()
        folder = self._run_dir(run_id)
        if (folder / "run.json").exists():
            raise OloproofError(f"run {run_id} is stored already", where=self.shown, fix="give the run a new id")
        for other in self._run_dirs():
            writer = _read(other / "writer.json")
            if writer and not (other / "run.json").exists() and process_gone(writer["host"], writer["pid"]):
                shutil.rmtree(other, ignore_errors=True)
        host, pid = this_process()
        if not _write(folder / "writer.json", {"host": host, "pid": pid, "started": time.time()}, once=True):
            raise OloproofError(f"run {run_id} is being written already", where=self.shown, fix="give the run a new id")
        return FolderWriter(self, run_id)

    def save_run(self, header: dict, cases: Iterable[dict], summary: dict) -> None:
        write_run(self.begin_run(header["id"]), header, cases, summary)

    def _head(self, run_id: str) -> tuple[str, str, dict]:
        """A finished run's header and summary texts and its seal, checked; ConfigError when there is none."""
        head = _read(self._run_dir(run_id) / "run.json")
        if head is None:
            raise ConfigError(f"no run {run_id}", fix="list the runs with `oloproof runs`")
        seal = seal_intact(head["header"], head["summary"], head["seal"])
        if seal is None:
            raise damaged_run(run_id, "its header or summary", self.shown)
        return head["header"], head["summary"], seal

    def _rows(self, run_id: str, after: int = -1) -> Iterator[list]:
        """The run's case rows ``[idx, case id, record, checksum]`` after ``after``, in case order."""
        files = sorted(self._run_dir(run_id).glob("cases-*.json"))
        firsts = [int(p.stem.split("-")[1]) for p in files]
        for i, path in enumerate(files):
            if i + 1 < len(files) and firsts[i + 1] <= after + 1:
                continue  # every row of this chunk is at or before ``after``
            yield from (row for row in _read(path) or [] if row[0] > after)

    def get_run(self, run_id: str) -> tuple[dict, dict]:
        header, summary, _ = self._head(run_id)
        return json.loads(header), json.loads(summary)

    def run_cases(self, run_id: str) -> Iterator[dict]:
        seal = self._head(run_id)[2]

        def page(after: int, size: int) -> list:
            return [tuple(row[:3]) for row in islice(self._rows(run_id, after), size)]

        return sealed_records(page, seal, lambda problem: damaged_run(run_id, problem, self.shown))

    def run_case(self, run_id: str, case_id: str) -> dict | None:
        self._head(run_id)
        row = next((r for r in self._rows(run_id) if r[1] == case_id), None)
        found = None if row is None else (row[0], row[2], row[3])
        return checked_case(run_id, case_id, found, lambda: self.run_cases(run_id), self.shown)

    def list_runs(self) -> list[dict]:
        return [json.loads(self._head(p.name)[0]) for p in self._run_dirs() if (p / "run.json").exists()]

    def resolve_run(self, prefix: str) -> str:
        if prefix == "latest":
            for header in reversed(self.list_runs()):
                if not header.get("parent"):  # a diagnosis's child run is never latest
                    return header["id"]
            raise ConfigError(f"no run in {self.options.path}/ yet", fix="start one with `oloproof run`")
        prefix = prefix if prefix.startswith("run_") else "run_" + prefix
        ids = [p.name for p in self._run_dirs() if p.name.startswith(prefix) and (p / "run.json").exists()]
        if len(ids) != 1:
            problem = f"{prefix} is ambiguous: it starts more than one run" if ids else f"no run {prefix}"
            raise ConfigError(problem, fix="give more characters of the run id, or list the runs with `oloproof runs`")
        return ids[0]

    # -- caches ----------------------------------------------------------------------

    def _cache_file(self, ns: str, key: str) -> Path:
        return self.path / "cache" / quote(ns, safe="") / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def cache_get_many(self, ns: str, keys: Iterable[str]) -> dict[str, object]:
        found: dict[str, object] = {}
        for key in dict.fromkeys(keys):
            entry = _read(self._cache_file(ns, key))
            if entry is None:
                continue
            if entry["key"] != key or entry["checksum"] != checksum(ns, key, entry["value"]):
                self.damaged[ns] = self.damaged.get(ns, 0) + 1  # a damaged value is a miss
                continue
            found[key] = json.loads(entry["value"])
        return found

    def cache_put_many(self, ns: str, items: Iterable[tuple[str, object]]) -> None:
        self._writable()
        for key, value in items:
            text = json.dumps(value, ensure_ascii=False)
            _write(self._cache_file(ns, key), {"key": key, "value": text, "checksum": checksum(ns, key, text)})

    # -- content-addressed objects ---------------------------------------------------

    def put_object(self, kind: str, object_id: str, record: dict) -> None:
        self._writable()
        text = json.dumps(record, sort_keys=True)
        _write(self.path / "objects" / f"{quote(object_id, safe='')}.json",
               {"id": object_id, "kind": kind, "created": time.time_ns(), "record": text,
                "checksum": checksum(object_id, kind, text)}, once=True)  # the first write stays

    def _objects(self, prefix: str = "") -> list[dict]:
        """The stored objects whose id starts with ``prefix``, oldest first, each checked."""
        found = [_read(p) for p in (self.path / "objects").glob("*.json") if unquote(p.stem).startswith(prefix)]
        found = sorted((o for o in found if o is not None), key=lambda o: (o["created"], o["id"]))
        for o in found:
            if o["checksum"] != checksum(o["id"], o["kind"], o["record"]):
                raise OloproofError(f"{o['kind']} {o['id']} is damaged (its checksum does not match)",
                                    where=self.shown, fix=FIX)
        return found

    def get_object(self, prefix: str) -> tuple[str, str, dict]:
        found = self._objects(prefix)
        if len(found) != 1:
            raise ConfigError(f"{prefix} is ambiguous" if found else f"no object {prefix}",
                              fix="copy the whole sha256:... id the command printed")
        return found[0]["id"], found[0]["kind"], json.loads(found[0]["record"])

    def list_objects(self, kind: str) -> list[tuple[str, dict]]:
        return [(o["id"], json.loads(o["record"])) for o in self._objects() if o["kind"] == kind]

    def all_objects(self) -> list[tuple[str, str, dict]]:
        return [(o["id"], o["kind"], json.loads(o["record"])) for o in self._objects()]

    # -- the whole store -------------------------------------------------------------

    def check(self) -> dict:
        """Every run against its seal, every cache value and object against its checksum, and the
        runs begun and not finished (not damage: ``writing`` while their process may finish them)."""
        runs, unfinished, orphans = [], [], []
        for folder in self._run_dirs():
            head, writer = _read(folder / "run.json"), _read(folder / "writer.json")
            if head is not None:
                runs.append((folder.name, head["header"], head["summary"], head["seal"],
                             (tuple(r[:3]) for r in self._rows(folder.name))))
            elif writer is not None:
                unfinished.append({"run": folder.name, "cases": sum(1 for _ in self._rows(folder.name)),
                                   "started": writer["started"], "writing": not process_gone(writer["host"], writer["pid"])})
            else:
                orphans.append(f"run {folder.name}: case records without their run")
        cache = ((unquote(p.parent.name), e["key"], e["value"], e["checksum"])
                 for p in (self.path / "cache").glob("*/*.json") if (e := _read(p)) is not None)
        objects = ((o["id"], o["kind"], o["record"], o["checksum"])
                   for p in (self.path / "objects").glob("*.json") if (o := _read(p)) is not None)
        counts, problems = check_rows(runs, cache, objects)
        counts["unfinished"] = len(unfinished)
        return {"store": self.shown, "counts": counts, "problems": problems + orphans, "unfinished": unfinished}


class FolderWriter(RunWriter):
    """A run being written: a chunk file a call of ``add``, then ``run.json`` (linked once), or nothing."""

    def __init__(self, store: JsonFolderStore, run_id: str):
        super().__init__(run_id)
        self.store, self.folder = store, store._run_dir(run_id)

    def _insert(self, rows: list[tuple[int, str, str, str]]) -> None:
        _write(self.folder / f"cases-{rows[0][0]:09d}.json", [list(row) for row in rows])

    def _finish(self, header: str, summary: str, seal: str) -> None:
        if not _write(self.folder / "run.json", {"header": header, "summary": summary, "seal": seal},
                      once=True):
            raise OloproofError(f"run {self.run_id} is stored already", where=self.store.shown, fix="give the run a new id")
        (self.folder / "writer.json").unlink(missing_ok=True)

    def _remove(self) -> None:
        if not (self.folder / "run.json").exists():
            shutil.rmtree(self.folder, ignore_errors=True)


@hookimpl
def oloproof_register_stores(registry):
    registry.add("jsonfolder", JsonFolderStore, options=Options)

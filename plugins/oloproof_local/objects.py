"""The local store's content-addressed objects (comparisons, diagnoses), each with its checksum."""

from __future__ import annotations

import json
import time

from oloproof import ConfigError, checked_object, checksum


class Objects:
    """Putting and getting objects (a part of ``LocalStore``)."""

    def put_object(self, kind: str, object_id: str, record: dict) -> None:
        text = json.dumps(record, sort_keys=True)
        with self._guard(), self._lock, self._write():
            self.db.execute("INSERT OR IGNORE INTO objects (id, kind, created, record, checksum) VALUES (?, ?, ?, ?, ?)",
                            (object_id, kind, time.time(), text, checksum(object_id, kind, text, key=self.key)))

    def _object(self, object_id: str, kind: str, record: str, stored: str | None) -> dict:
        return checked_object(object_id, kind, record, stored, self.key, self.shown, self._damaged)

    def get_object(self, prefix: str) -> tuple[str, str, dict]:
        with self._guard(), self._lock:
            rows = self.db.execute(f"SELECT id, kind, record, {self.object_sum} FROM objects WHERE id >= ? AND id < ? LIMIT 2",
                                   (prefix, prefix + "\uffff")).fetchall()
        if len(rows) != 1:
            problem = f"no object {prefix}" if not rows else f"{prefix} is ambiguous"
            raise ConfigError(problem, fix="copy the whole sha256:... id the command printed")
        object_id, kind, record, stored = rows[0]
        return object_id, kind, self._object(object_id, kind, record, stored)

    def list_objects(self, kind: str) -> list[tuple[str, dict]]:
        """Every stored object of ``kind``, oldest first."""
        with self._guard(), self._lock:
            rows = self.db.execute(f"SELECT id, record, {self.object_sum} FROM objects WHERE kind = ? ORDER BY created, rowid",
                                   (kind,)).fetchall()
        return [(object_id, self._object(object_id, kind, record, stored)) for object_id, record, stored in rows]

    def all_objects(self) -> list[tuple[str, str, dict]]:
        """Every stored object as ``(id, kind, record)``, oldest first (``oloproof store copy``)."""
        with self._guard(), self._lock:
            rows = self.db.execute(f"SELECT id, kind, record, {self.object_sum} FROM objects ORDER BY created, rowid").fetchall()
        return [(object_id, kind, self._object(object_id, kind, record, stored)) for object_id, kind, record, stored in rows]

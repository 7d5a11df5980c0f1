"""The postgres store's content-addressed objects (comparisons, diagnoses, validations), each with
its checksum."""

from __future__ import annotations

import json
import time

from oloproof import ConfigError, checked_object, checksum


class Objects:
    """Putting and getting objects (a part of ``PostgresStore``)."""

    def put_object(self, kind: str, object_id: str, record: dict) -> None:
        text = json.dumps(record, sort_keys=True)
        self._write(lambda conn: conn.execute(
            f"INSERT INTO {self.schema}.objects (id, kind, created, record, checksum) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING", (object_id, kind, time.time(), text, checksum(object_id, kind, text, key=self.key))))

    def _object(self, object_id: str, kind: str, record: str, stored: str) -> dict:
        return checked_object(object_id, kind, record, stored, self.key, self.shown, self._damaged)

    def get_object(self, prefix: str) -> tuple[str, str, dict]:
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT id, kind, record, checksum FROM {self.schema}.objects WHERE id >= %s AND id < %s "
                                "ORDER BY id LIMIT 2", (prefix, prefix + "\uffff")).fetchall()
        if len(rows) != 1:
            problem = f"no object {prefix}" if not rows else f"{prefix} is ambiguous"
            raise ConfigError(problem, fix="copy the whole sha256:... id the command printed")
        object_id, kind, record, stored = rows[0]
        return object_id, kind, self._object(object_id, kind, record, stored)

    def list_objects(self, kind: str) -> list[tuple[str, dict]]:
        """Every stored object of ``kind``, oldest first."""
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT id, record, checksum FROM {self.schema}.objects WHERE kind = %s ORDER BY seq",
                                (kind,)).fetchall()
        return [(object_id, self._object(object_id, kind, record, stored)) for object_id, record, stored in rows]

    def all_objects(self) -> list[tuple[str, str, dict]]:
        """Every stored object as ``(id, kind, record)``, oldest first (``oloproof store copy``)."""
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT id, kind, record, checksum FROM {self.schema}.objects ORDER BY seq").fetchall()
        return [(object_id, kind, self._object(object_id, kind, record, stored)) for object_id, kind, record, stored in rows]

"""The local store's caches: namespaces of values by key, each value with its checksum (a value
that fails it is a miss, counted in the store's ``damaged``)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from oloproof import checksum, json_text, verdict

from .keys import stored_key

CHUNK = 500  # keys per SELECT ... IN (...), under SQLite's variable limit


class Caches:
    """The cache namespaces: get, put, stats and clear (a part of ``LocalStore``)."""

    def cache_get_many(self, ns: str, keys: Iterable[str]) -> dict[str, object]:
        """The cached values of ``keys`` in namespace ``ns`` that exist and are intact."""
        asked = {stored_key(key): key for key in keys}
        keys = list(asked)
        found: dict[str, object] = {}
        for start in range(0, len(keys), CHUNK):
            part = keys[start:start + CHUNK]
            marks = ",".join("?" * len(part))
            with self._read() as db:
                rows = db.execute(f"SELECT key, value, {self.cache_sum} FROM cache WHERE ns = ? AND key IN ({marks})",
                                  [ns, *part]).fetchall()
            for key, value, stored in rows:
                key = asked[key]
                found_sum = verdict(stored, (ns, key, value), self.key)
                if found_sum == "unverified":  # no checksum, or signed with a key we lack: recomputed
                    continue
                if found_sum != "ok":  # damaged, or (with the store key) not signed with it: forged
                    self.damaged[ns] = self.damaged.get(ns, 0) + 1
                    continue
                found[key] = json.loads(value)
        return found

    def cache_holds(self, ns: str) -> bool:
        """Whether namespace ``ns`` holds any value (one probe of the cache's index)."""
        with self._read() as db:
            return db.execute("SELECT 1 FROM cache WHERE ns = ? LIMIT 1", (ns,)).fetchone() is not None

    def cache_put_many(self, ns: str, items: Iterable[tuple[str, object]]) -> None:
        rows = []
        for k, v in items:
            value = json_text(v)
            rows.append((ns, stored_key(k), value, checksum(ns, k, value, key=self.key)))
        if rows:
            with self._guard(), self._lock, self._write():
                self.db.executemany("INSERT OR REPLACE INTO cache (ns, key, value, checksum) VALUES (?, ?, ?, ?)",
                                    rows)

    def cache_stats(self) -> list[tuple[str, int, int]]:
        """(namespace, entries, bytes of stored values) for every cache namespace, by name."""
        with self._guard(), self._lock:
            rows = self.db.execute("SELECT ns, COUNT(*), COALESCE(SUM(LENGTH(CAST(value AS BLOB))), 0) FROM cache "
                                   "GROUP BY ns ORDER BY ns").fetchall()
        return [(ns, count, size) for ns, count, size in rows]

    def cache_clear(self, ns: str) -> int:
        """Delete every entry of namespace ``ns``; the number deleted. Runs are never touched."""
        with self._guard(), self._lock, self._write():
            return self.db.execute("DELETE FROM cache WHERE ns = ?", (ns,)).rowcount

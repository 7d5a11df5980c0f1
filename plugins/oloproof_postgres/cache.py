"""The postgres store's caches: namespaces of values by key, upserted by several writers at once,
each value with its checksum (a value that fails it is a miss, counted in the store's ``damaged``)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from oloproof import checksum, json_text, verdict

CHUNK = 1000  # keys per SELECT ... = ANY(...)


class Caches:
    """The cache namespaces: get, stats, clear and put (a part of ``PostgresStore``)."""

    def cache_get_many(self, ns: str, keys: Iterable[str]) -> dict[str, object]:
        """The cached values of ``keys`` in namespace ``ns`` that exist and are intact."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, object] = {}
        for start in range(0, len(keys), CHUNK):
            with self._conn() as conn, self._guard():
                rows = conn.execute(f"SELECT key, value, checksum FROM {self.schema}.cache WHERE ns = %s AND key = ANY(%s)",
                                    (ns, keys[start:start + CHUNK])).fetchall()
            for key, value, stored in rows:
                found_sum = verdict(stored, (ns, key, value), self.key)
                if found_sum == "unverified":  # signed with a key this process lacks: recomputed
                    continue
                if found_sum != "ok":  # damaged, or (with the store key) not signed with it: forged
                    self.damaged[ns] = self.damaged.get(ns, 0) + 1
                    continue
                found[key] = json.loads(value)
        return found

    def cache_holds(self, ns: str) -> bool:
        """Whether namespace ``ns`` holds any value (one probe of the cache's index)."""
        with self._conn() as conn, self._guard():
            row = conn.execute(f"SELECT EXISTS (SELECT 1 FROM {self.schema}.cache WHERE ns = %s)", (ns,)).fetchone()
        return bool(row[0])

    def cache_stats(self) -> list[tuple[str, int, int]]:
        """(namespace, entries, bytes of stored values) for every cache namespace, by name."""
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT ns, COUNT(*), COALESCE(SUM(OCTET_LENGTH(value)), 0) FROM {self.schema}.cache "
                                "GROUP BY ns ORDER BY ns").fetchall()
        return [(ns, int(count), int(size)) for ns, count, size in rows]

    def cache_clear(self, ns: str) -> int:
        """Delete every entry of namespace ``ns``; the number deleted. Runs are never touched."""
        deleted = []

        def work(conn) -> None:
            deleted.append(conn.execute(f"DELETE FROM {self.schema}.cache WHERE ns = %s", (ns,)).rowcount)

        self._write(work)
        return deleted[0]

    def cache_put_many(self, ns: str, items: Iterable[tuple[str, object]]) -> None:
        values = {}
        for k, v in items:  # the last value of a key wins, as in one writer's order
            values[k] = json_text(v)
        # in key order: two writers upserting the same keys take their row locks in one order
        rows = [(ns, k, value, checksum(ns, k, value, key=self.key)) for k, value in sorted(values.items())]
        if not rows:
            return

        def work(conn) -> None:
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {self.schema}.cache (ns, key, value, checksum) VALUES (%s, %s, %s, %s) "
                                "ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, checksum = EXCLUDED.checksum",
                                rows)

        self._write(work)

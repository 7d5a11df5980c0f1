"""The store's tables, versioned: each migration takes the schema one version further.
``oloproof store init`` and ``oloproof store migrate`` apply them; a run never does."""

from __future__ import annotations

from oloproof import OloproofError, shown_text

# migration n (1-based) takes the schema from version n-1 to n; append, never edit
MIGRATIONS = [
    """
    CREATE SCHEMA IF NOT EXISTS {s};
    CREATE TABLE {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE {s}.runs (id TEXT COLLATE "C" PRIMARY KEY, created DOUBLE PRECISION NOT NULL,
                           parent TEXT COLLATE "C", header TEXT NOT NULL, summary TEXT NOT NULL, seal TEXT NOT NULL);
    CREATE TABLE {s}.run_cases (run_id TEXT COLLATE "C" NOT NULL REFERENCES {s}.runs (id),
                                idx INTEGER NOT NULL, case_id TEXT NOT NULL, record TEXT NOT NULL,
                                PRIMARY KEY (run_id, idx));
    CREATE TABLE {s}.cache (ns TEXT COLLATE "C" NOT NULL, key TEXT COLLATE "C" NOT NULL, value TEXT NOT NULL,
                            checksum TEXT NOT NULL, PRIMARY KEY (ns, key));
    CREATE TABLE {s}.objects (id TEXT COLLATE "C" PRIMARY KEY, kind TEXT NOT NULL, seq BIGSERIAL,
                              created DOUBLE PRECISION NOT NULL, record TEXT NOT NULL, checksum TEXT NOT NULL);
    INSERT INTO {s}.meta (key, value) VALUES ('schema_version', '0');
    """,
    # version 2: the lookups `latest` and a diagnosis's confirmations make, indexed
    """
    CREATE INDEX objects_kind_seq ON {s}.objects (kind, seq);
    CREATE INDEX runs_latest ON {s}.runs (id) WHERE parent IS NULL;
    """,
    # version 3: runs streamed in (begin_run / add / finish): case rows are written before their
    # run row, each with its own checksum (run_case reads one alone, by case id), and each run
    # being written registers its writer (oloproof store check reports the unfinished ones)
    """
    ALTER TABLE {s}.run_cases DROP CONSTRAINT IF EXISTS run_cases_run_id_fkey;
    ALTER TABLE {s}.run_cases ADD COLUMN checksum TEXT;
    CREATE INDEX run_cases_case ON {s}.run_cases (run_id, case_id);
    CREATE TABLE {s}.writers (run_id TEXT COLLATE "C" PRIMARY KEY, started DOUBLE PRECISION NOT NULL,
                              host TEXT NOT NULL, pid INTEGER NOT NULL);
    """,
    # version 4: query_cases: the words a search reads of each case in a GIN index (tsvector), and
    # a judgment's status rank and value as a sort and a filter read them (storage/query.py)
    """
    CREATE FUNCTION {s}.case_words(record TEXT) RETURNS tsvector LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $f$
    DECLARE r jsonb; t text;
    BEGIN
      BEGIN
        r := record::jsonb;
        t := concat_ws(' ', r->>'id',
          (SELECT string_agg(key || '=' || value, ' ') FROM jsonb_each_text(
             CASE WHEN jsonb_typeof(r->'case'->'metadata') = 'object' THEN r->'case'->'metadata' ELSE '{{}}'::jsonb END)),
          r->'case'->>'input', r->'case'->>'expected', r->>'output', r->>'missing',
          jsonb_path_query_array(r, '$.trials[*].output')::text,
          jsonb_path_query_array(r, '$.judgments.*.reason')::text,
          jsonb_path_query_array(r, '$.judgments.*.detail.rationale')::text);
      EXCEPTION WHEN others THEN
        t := record;
      END;
      RETURN to_tsvector('simple', regexp_replace(lower(left(t, 500000)), '[^[:alnum:]]+', ' ', 'g'));
    END $f$;
    CREATE FUNCTION {s}.judgment_rank(j jsonb) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
      SELECT CASE WHEN j IS NULL THEN 5 ELSE CASE j->>'status' WHEN 'fail' THEN 0 WHEN 'missing' THEN 1
             WHEN 'pass' THEN 3 WHEN 'excluded' THEN 4 ELSE 2 END END $f$;
    CREATE FUNCTION {s}.judgment_value(j jsonb) RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
      SELECT CASE jsonb_typeof(j->'value') WHEN 'number' THEN (j->>'value')::double precision
             WHEN 'boolean' THEN CASE WHEN (j->'value')::boolean THEN 1.0 ELSE 0.0 END ELSE 0.0 END $f$;
    CREATE INDEX run_cases_words ON {s}.run_cases USING GIN ({s}.case_words(record));
    """,
]
VERSION = len(MIGRATIONS)
UPGRADE = "upgrade oloproof on this machine (pip install -U 'oloproof[postgres]')"


DAMAGED_VERSION = ("the meta table is damaged: restore it from a backup, or set meta.schema_version to the "
                   "version the tables have")


def current(conn, schema: str, where: str = "") -> int | None:
    """The schema version stored in the database, or None when there are no tables."""
    if conn.execute("SELECT to_regclass(%s)", (f'"{schema}".meta',)).fetchone()[0] is None:
        return None
    row = conn.execute(f'SELECT value FROM "{schema}".meta WHERE key = %s', ("schema_version",)).fetchone()
    if row is None:
        raise OloproofError("the store's schema version is missing from its meta table", where=where,
                            fix=DAMAGED_VERSION)
    try:
        version = int(row[0])
    except (TypeError, ValueError):
        version = -1
    if version < 0 or str(version) != str(row[0]).strip():
        raise OloproofError(f"the store's schema version {shown_text(row[0], 20)!r} is not a version number",
                            where=where, fix=DAMAGED_VERSION)
    return version


def require(conn, schema: str, where: str) -> None:
    """An error with its fix unless the database holds the tables of this version."""
    found = current(conn, schema, where)
    if found is None:
        raise OloproofError("the store's tables do not exist in this database", where=where,
                            fix="run `oloproof store init` once (with the same store settings) to create them")
    if found < VERSION:
        raise OloproofError(f"the store's schema is version {found}, this oloproof needs version {VERSION}",
                            where=where, fix="run `oloproof store migrate` (once, from one machine)")
    if found > VERSION:
        raise OloproofError(f"the store's schema is version {found}, newer than this oloproof knows ({VERSION})",
                            where=where, fix=UPGRADE)


def migrate(conn, schema: str, where: str, *, create: bool, target: int = VERSION) -> tuple[int | None, int]:
    """Apply the migrations the database lacks, under a lock so two at once do not collide;
    ``create`` allows starting from nothing. Returns the versions before and after."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"oloproof schema {schema}",))
        found = current(conn, schema, where)
        if found is None and not create:
            raise OloproofError("the store's tables do not exist in this database", where=where,
                                fix="run `oloproof store init` to create them")
        if found is not None and found > VERSION:
            raise OloproofError(f"the store's schema is version {found}, newer than this oloproof knows ({VERSION})",
                                where=where, fix=UPGRADE)
        start = 0 if found is None else found
        for version in range(start + 1, target + 1):
            conn.execute(MIGRATIONS[version - 1].format(s=f'"{schema}"'))
            conn.execute(f'UPDATE "{schema}".meta SET value = %s WHERE key = %s', (str(version), "schema_version"))
        return found, max(start, target)


TABLES = ("meta", "runs", "run_cases", "cache", "objects", "writers")  # the tables of this version


def damage(conn, schema: str) -> tuple[list[str], bool]:
    """What ``oloproof store check`` reports of the schema itself, as the local store reports an
    empty file: a schema holding none of the store's tables, a table missing, a schema version
    missing or not a number. Returns the problems and whether the rows can still be checked (every
    table there). A schema that does not exist at all is left to :func:`require`'s error."""
    if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
        return [], True
    present = {row[0] for row in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')", (schema,))}
    missing = [table for table in TABLES if table not in present]
    if len(missing) == len(TABLES):
        return [f"database: schema {schema} holds none of the store's tables: whatever it held is lost, or "
                "`oloproof store init` never ran on it"], False
    problems = [f"database: table {schema}.{table} is missing" for table in missing]
    if "meta" in present:
        try:
            current(conn, schema)
        except OloproofError as exc:
            problems.append(f"database: {exc.problem}")
    return problems, not missing

"""Reaching the server: the dsn (``${VAR}`` expanded, its password never shown), the schema
version check, and PostgreSQL's errors as one line each."""

from __future__ import annotations

import os
import re

from oloproof import ConfigError, OloproofError

ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")
INSTALL = "pip install 'oloproof[postgres]'"
INIT = "run `oloproof store init` once (with the same store settings) to create the tables"


def expand(value: str) -> str:
    """``${NAME}`` replaced by the environment variable NAME, which must be set and not empty."""

    def one(match: re.Match) -> str:
        name = match.group(1)
        if not os.environ.get(name, "").strip():
            state = "not set" if name not in os.environ else "empty"
            raise ConfigError(f"the store's dsn uses ${{{name}}}, but the environment variable {name} is {state}",
                              where="store.dsn", fix=f"export {name}=postgresql://user@host/database before running")
        return os.environ[name]

    return ENV.sub(one, value)


def psycopg():
    """The psycopg module, or a one-line error naming the extra to install."""
    try:
        import psycopg as module
        import psycopg_pool  # noqa: F401 - checked here so the error names both
    except ImportError:
        raise ConfigError("the postgres store needs psycopg and psycopg_pool, which are not installed",
                          where="store.type", fix=INSTALL) from None
    return module


def parse(dsn: str) -> dict:
    """The dsn's parameters; a dsn libpq cannot read is an error that never repeats it."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        return conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - libpq's message may quote the password: never shown
        raise ConfigError("the store's dsn is not a PostgreSQL connection string", where="store.dsn",
                          fix="write postgresql://user@host:5432/database or host=... dbname=... "
                              "(the password in PGPASSWORD or ~/.pgpass)") from None


def describe(params: dict, schema: str) -> str:
    """Where the store is, without its password: ``postgres user@host:port/db (schema)``."""
    user = f"{params['user']}@" if params.get("user") else ""
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgres {user}{host}{port}/{params.get('dbname', '')} ({schema})"


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    # a password libpq quoted back from a connection string it could not read
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text))


def problem(exc: Exception, where: str, secrets: list[str]) -> OloproofError:
    """One line for a psycopg error: what happened, and the fix; never the password."""
    from psycopg import errors

    first = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, secrets)
    if isinstance(exc, errors.UndefinedTable | errors.InvalidSchemaName):
        return OloproofError("the store's tables do not exist in this database", where=where, fix=INIT)
    if isinstance(exc, errors.ReadOnlySqlTransaction):
        return OloproofError("the store was opened read-only", where=where, fix="use a command that writes it")
    if isinstance(exc, errors.InsufficientPrivilege):
        return OloproofError(f"permission denied: {first}", where=where,
                             fix="grant the dsn's user the writer role's rights (docs/stores.md, Roles: USAGE on the "
                                 "schema, SELECT, INSERT, UPDATE, DELETE on its tables, USAGE on its sequences), "
                                 "or use a command that only reads")
    if "password authentication failed" in first or "no password supplied" in first:
        return OloproofError(f"could not connect: {first}", where=where,
                             fix="check the dsn's user and password (PGPASSWORD or ~/.pgpass)")
    if "does not exist" in first and "database" in first:
        return OloproofError(f"could not connect: {first}", where=where,
                             fix="create the database (createdb), or name an existing one in the dsn")
    if "connection option" in first or "invalid connection" in first:
        return OloproofError(f"the store's dsn is not valid: {first}", where=where,
                             fix="correct the dsn (postgresql://user@host:5432/database)")
    if type(exc).__name__ in ("OperationalError", "PoolTimeout", "ConnectionTimeout"):
        return OloproofError(f"could not reach the server: {first}", where=where,
                             fix="check the dsn's host and port, and that PostgreSQL is running and reachable")
    return OloproofError(f"the store could not be used: {first}", where=where,
                         fix="check the server's log, then run `oloproof store check`")


def schema_ok(name: str) -> bool:
    """Whether ``name`` is a plain lowercase PostgreSQL name (a store's schema)."""
    return bool(SCHEMA_NAME.match(name))

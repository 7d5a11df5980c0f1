"""A real PostgreSQL server for the tests: initdb into a temporary directory, started as an
unprivileged user on a free port of 127.0.0.1 (its Unix socket in that directory), with a
password for its user, and stopped at the end of the session.

Outside CI a machine without PostgreSQL skips these tests with the reason; with CI=true set,
they fail instead.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "oloproof"


def binaries() -> Path | None:
    """The folder of initdb, pg_ctl and postgres: Debian's /usr/lib/postgresql/<ver>/bin first."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.bin = binaries()
        if self.bin is None:
            raise RuntimeError("PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)")
        self.as_user: list[str] = []
        owner = None
        if os.geteuid() == 0:  # initdb refuses to run as root: the server runs as its own user
            name = "postgres" if _user_exists("postgres") else "nobody"
            self.as_user = ["runuser", "-u", name, "--"]
            owner = pwd.getpwnam(name)
        self.dir = Path(tempfile.mkdtemp(prefix="oloproof-pg-"))
        if owner is not None:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        self.password = "pw-" + secrets.token_hex(8)
        self.port = 0
        self.owner = owner

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([*self.as_user, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self.dir, stdin=subprocess.DEVNULL)

    def start(self) -> Server:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        pwfile = self.dir / "pw"
        pwfile.write_text(self.password + "\n")
        if self.owner is not None:
            os.chown(pwfile, self.owner.pw_uid, self.owner.pw_gid)
        done = self._run(str(self.bin / "initdb"), "-D", str(self.dir / "data"), "-U", USER, f"--pwfile={pwfile}",
                         "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
        pwfile.unlink()
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-300:]}")
        for _ in range(5):  # another process may take the free port first
            self.port = free_port()
            options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
            done = self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-w", "-t", "60",
                             "-o", options, "-l", str(self.dir / "log"), "start", timeout=90)
            if done.returncode == 0:
                break
        else:
            raise RuntimeError(f"the server did not start: {(self.dir / 'log').read_text()[-300:]}")
        self._create_database()

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {USER}")

    def url(self, dbname: str = USER) -> str:
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        if (self.dir / "data" / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False

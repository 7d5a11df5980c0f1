"""The driver's watchdog: when ``oloproof run`` started a Ray cluster of its own (no address, no
RAY_ADDRESS) and is killed (SIGKILL, the OOM killer), every process that cluster started ends
within seconds rather than a minute.

Why it is needed: Ray binds the cluster it starts to the driver (``PR_SET_PDEATHSIG``: the kernel
SIGKILLs the GCS and the raylet when the driver dies), and the workers notice their raylet is gone
at once. But the raylet's two agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``), which
notice it too within 2 s, first report the "unexpected" death of the raylet to the GCS, which died
with it, and that call waits out a timeout fixed at 60 s in Ray (``publish_error_to_driver``)
before they exit.

This is a separate process (plain Python, no import of Ray or Oloproof), started by the driver
with a pipe on its stdin. Every half second it notes the driver's descendants (pid and start
time, from /proc); when the pipe reaches its end without the word ``exit`` (the driver is gone),
it sends SIGTERM to each noted process still alive, then SIGKILL to any left after 2 s. A driver
that finishes normally writes ``exit`` first and shuts Ray down itself. Linux only (/proc); Ray
elsewhere starts its own reaper, which ends the process group with SIGTERM.

    python watchdog.py DRIVER_PID
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time


def started(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def parents() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    out[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return out


def descendants(roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def main(driver: int) -> int:
    me = os.getpid()
    noted: dict[int, int] = {}  # pid -> start time

    def note(pids: set[int]) -> None:
        for pid in pids - {me}:
            when = started(pid)
            if when is not None:
                noted.setdefault(pid, when)

    told = b""
    while True:
        note(descendants({driver}))
        ready, _, _ = select.select([0], [], [], 0.5)
        if ready:
            chunk = os.read(0, 64)
            if not chunk:
                break
            told += chunk
            if b"exit" in told:
                return 0
    note(descendants(set(noted)))  # what the noted processes started since, before they go
    alive = {pid for pid, when in noted.items() if started(pid) == when}
    for pid in alive:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + 2
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {pid for pid in alive if started(pid) == noted[pid]}
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    sys.exit(main(int(sys.argv[1])))

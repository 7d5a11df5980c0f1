"""A real Ray head for the tests: ``ray start --head`` in its own temporary directory, stopped at
the end. Not local mode: the workers are separate processes, as on a cluster."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayHead:
    def __init__(self, num_cpus: int = 2):
        self.num_cpus = num_cpus
        self.temp = Path(tempfile.mkdtemp(prefix="oray"))  # short: Ray's socket paths have a length limit
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.ray = str(Path(sys.executable).with_name("ray"))

    def env(self) -> dict:
        # RAY_AUTH_MODE: a token in ~/.ray/auth_token (which a `ray.init()` that starts a cluster
        # writes in Ray 2.60) would turn token authentication on for this head but not for
        # `ray status`; the head listens on 127.0.0.1 only
        return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": self.address, "RAY_AUTH_MODE": "disabled"}

    def start(self) -> RayHead:
        # --block keeps the head's processes under this one, in a session of their own: stopping
        # it stops this head only, never another Ray cluster on the machine
        cmd = [self.ray, "start", "--head", "--block", f"--port={self.port}", f"--num-cpus={self.num_cpus}",
               "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.temp}",
               "--node-ip-address=127.0.0.1"]
        self.log = self.temp / "head.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(cmd, env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start failed: {self.log.read_text()[-2000:]}")
            status = subprocess.run([self.ray, "status", f"--address={self.address}"], env=self.env(),
                                    capture_output=True, text=True, timeout=60)
            if status.returncode == 0:
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError("the Ray head did not come up within 120 s")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the head and every process it started
            self.proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(self.temp, ignore_errors=True)

"""A real Ray head for the tests: ``ray start --head`` in its own temporary directory, stopped at
the end. Not local mode: the workers are separate processes, as on a cluster."""

from __future__ import annotations

import os
import shutil
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
        return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": self.address}

    def start(self) -> RayHead:
        cmd = [self.ray, "start", "--head", f"--port={self.port}", f"--num-cpus={self.num_cpus}",
               "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.temp}",
               "--node-ip-address=127.0.0.1"]
        proc = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=180)
        if proc.returncode != 0:
            raise RuntimeError(f"ray start failed: {proc.stderr[-2000:]}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = subprocess.run([self.ray, "status", f"--address={self.address}"], env=self.env(),
                                    capture_output=True, text=True, timeout=60)
            if status.returncode == 0:
                return self
            time.sleep(0.5)
        raise RuntimeError("the Ray head did not come up within 60 s")

    def stop(self) -> None:
        subprocess.run([self.ray, "stop", "--force"], env=self.env(), capture_output=True, timeout=120)
        shutil.rmtree(self.temp, ignore_errors=True)

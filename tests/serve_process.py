"""A real ``tiervault serve`` process on 127.0.0.1 for tests, plus token helpers.

``ServeProcess(root)`` starts the server from ``root`` (which holds agent.yaml)
on a free port, waits for ``/healthz`` and stops it on exit (SIGTERM, or
``kill()`` for SIGKILL). ``create_token(root, ...)`` runs the real
``tiervault token create`` and returns the printed token.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

__all__ = ["ServeProcess", "create_token", "free_port", "clean_env", "run_cli", "error_of"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(root / "home")
    env.update(extra)
    return env


def run_cli(root: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=root,
                       env=clean_env(root, **env), capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def create_token(root: Path, agent: str, allow: str, *extra: str) -> str:
    r = run_cli(root, "token", "create", "--agent", agent, "--allow", allow, *extra)
    return r.stdout.strip().splitlines()[0]


class ServeProcess:
    """``tiervault serve`` in a subprocess; ``url`` is its base URL."""

    def __init__(self, root: Path, *args: str, port: int | None = None, **env: str) -> None:
        self.root = root
        self.args = args
        self.port = port or free_port()
        self.env = env
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = root / f"serve-{self.port}.log"
        self.health_verify: Any = True  # an SSLContext trusting a TLS server's self-signed cert

    def start(self) -> "ServeProcess":
        (self.root / "home").mkdir(exist_ok=True)
        fh = self.log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tiervault", "serve", "--port", str(self.port), *self.args],
            cwd=self.root, env=clean_env(self.root, **self.env), stdout=fh, stderr=fh)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}: {self.output()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1,
                             verify=self.health_verify).status_code == 200:
                    return self
            except httpx.HTTPError:  # not listening yet: ask again until the deadline
                pass
            time.sleep(0.1)
        raise RuntimeError(f"serve did not answer /healthz: {self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=15)

    def __enter__(self) -> "ServeProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, **{"timeout": 30, **kwargs})


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` object of a failure response (asserting the stable shape)."""
    body = json.loads(response.text)
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]

"""`tiervault embed` and embed-on-write through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from embeddings_server import FakeEmbeddingServer

KEY = "sk-cli-secret-7777"


def run(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TIERVAULT_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=cwd, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120)


def write_config(root: Path, url: str | None) -> None:
    embedding = (f"embedding:\n  provider: http\n  model: fake-model\n  baseUrl: {url}\n  apiKey: {KEY}\n"
                 "features:\n  embedding-enabled: true\n") if url else ""
    (root / "agent.yaml").write_text(
        f"tiers:\n  agent: {root / 'agent.db'}\n  project: {root / 'project.db'}\n  team: {root / 'team.db'}\n"
        + embedding)


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def capture(root: Path, i: int, env: dict | None = None, tier: str = "agent") -> subprocess.CompletedProcess:
    r = run(["capture", "--id", f"e{i}", "--title", f"Entry {i} title", "--description", f"body {i}",
             "--tags", "x,y", "--tier", tier], root, env)
    assert r.returncode == 0, r.stderr
    return r


def states(root: Path) -> dict[str, tuple[str, int]]:
    con = sqlite3.connect(root / "agent.db")
    rows = con.execute("SELECT entry_id, state, retries FROM embedding_state").fetchall()
    con.close()
    return {r[0]: (r[1], r[2]) for r in rows}


def embed_json(root: Path, *extra: str, env: dict | None = None) -> tuple[int, dict]:
    r = run(["embed", "--json", *extra], root, env)
    assert r.returncode in (0, 1), r.stderr
    assert KEY not in r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert list(out) == ["embedded", "skipped", "failed", "pending"]
    return r.returncode, out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


def test_capture_embeds_on_write_and_embed_reports_counts(root: Path, embeddings_server: FakeEmbeddingServer):
    write_config(root, embeddings_server.openai_url)
    capture(root, 1)
    capture(root, 2, tier="team")
    assert len(embeddings_server.requests) == 2
    assert embeddings_server.requests[0].bearer == KEY
    assert states(root) == {"e1": ("ok", 0)}
    code, out = embed_json(root)
    assert code == 0 and out == {"embedded": 0, "skipped": 2, "failed": 0, "pending": 0}
    assert len(embeddings_server.requests) == 2  # nothing changed: no provider call
    code, out = embed_json(root, "--tier", "team", "--rebuild")
    assert code == 0 and out == {"embedded": 1, "skipped": 0, "failed": 0, "pending": 0}
    r = run(["embed"], root)
    assert r.returncode == 0 and "agent: embedded 0, skipped 1, failed 0, pending 0" in r.stdout


def test_failed_embeddings_are_kept_and_picked_up_when_the_provider_recovers(
        root: Path, embeddings_server: FakeEmbeddingServer):
    write_config(root, embeddings_server.openai_url)
    down = {"TIERVAULT_EMBEDDING_BASE_URL": dead_url()}
    r = capture(root, 1, env=down)
    assert "failed" in r.stderr and "tiervault embed" in r.stderr and KEY not in r.stderr
    assert states(root) == {"e1": ("error", 1)}
    r = run(["embed", "--json"], root, down)
    assert r.returncode == 1 and json.loads(r.stdout) == {"embedded": 0, "skipped": 0, "failed": 1, "pending": 0}
    assert "1 entries failed to embed" in r.stderr and "Connection refused" in r.stderr
    assert states(root) == {"e1": ("error", 2)}
    code, out = embed_json(root)
    assert code == 0 and out == {"embedded": 1, "skipped": 0, "failed": 0, "pending": 0}
    assert states(root) == {"e1": ("ok", 0)}


def test_embed_without_embeddings_configured_is_a_clear_error(root: Path):
    write_config(root, None)
    r = run(["embed", "--json"], root)
    assert r.returncode == 2 and "embedding-enabled: true" in r.stderr
    assert json.loads(r.stdout)["error"] == "config"  # --json: the failure as a JSON object
    write_config(root, "http://127.0.0.1:9/v1")
    r = run(["embed", "--tier", "nope"], root)
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr

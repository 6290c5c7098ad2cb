"""`tiervault search / load / feedback / stats` end to end, in subprocesses, on real tier files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tiervault.brain.shapes import SIGNALS

SCAN_KEYS = {"id", "title", "score", "type", "domain", "severity", "tags", "snippet",
             "tokenEstimate", "tier"}


def write_config(home: Path) -> None:
    (home / "agent.yaml").write_text(
        "agent_id: cli-test\n"
        "tiers:\n"
        f"  agent: {home / 'agent.db'}\n"
        f"  project: {home / 'project.db'}\n"
        f"  team: {home / 'team.db'}\n")


@pytest.fixture
def vault(built: Path, tmp_path: Path) -> Path:
    """A private copy of the built vault (tests may write feedback and memories)."""
    for f in built.glob("*.db"):
        shutil.copy(f, tmp_path / f.name)
    write_config(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three tier files with some entries and a link, made through the CLI once per module."""
    tmp_path = tmp_path_factory.mktemp("vault")
    write_config(tmp_path)
    filler = tmp_path / "filler.jsonl"
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    filler.write_text("".join(
        json.dumps({"id": f"fill-{i}", "title": f"{words[i % 6]} {words[(i * 5) % 6]} memo {i}",
                    "description": f"Remark {i} on {words[(i * 7) % 6]}."}) + "\n"
        for i in range(40)))
    run(tmp_path, "import", str(filler), "--tier", "team")
    run(tmp_path, "capture", "--id", "kafka-lag", "--title", "Watch Kafka consumer lag",
        "--description", "Alert when consumer lag grows for five minutes.", "--tags", "kafka,alerting",
        "--severity", "warning", "--domain", "streaming")
    run(tmp_path, "capture", "--id", "kafka-lag-team", "--title", "Watch Kafka consumer lag",
        "--description", "Alert when consumer lag grows for ten minutes.", "--tier", "team",
        "--domain", "streaming")
    run(tmp_path, "capture", "--id", "rebalance", "--title", "Avoid partition rebalance storms",
        "--description", "Use static group membership.", "--tier", "project", "--type", "rule")
    run(tmp_path, "link", "kafka-lag", "rebalance", "--type", "supports")
    return tmp_path


def run(home: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home), "TIERVAULT_CONFIG": str(home / "agent.yaml")}
    proc = subprocess.run([sys.executable, "-m", "tiervault.cli", *args], capture_output=True,
                          text=True, env=env, cwd=home, timeout=120)
    assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc


def run_json(home: Path, *args: str, code: int = 0):
    return json.loads(run(home, *args, "--json", code=code).stdout)


def test_scan_then_full_through_the_cli(vault: Path):
    rows = run_json(vault, "search", "kafka consumer lag")
    assert rows and all(set(r) == SCAN_KEYS for r in rows)
    assert [r["id"] for r in rows[:2]] == ["kafka-lag", "kafka-lag-team"]  # agent outranks team
    assert rows[0]["tier"] == "agent" and rows[1]["tier"] == "team"
    graph = next(r for r in rows if r["id"] == "rebalance")
    assert graph["tier"] == "project"
    picked = [rows[0]["id"], rows[1]["id"]]
    loaded = run_json(vault, "load", *picked)
    assert [r["id"] for r in loaded] == picked and all(r["found"] for r in loaded)
    assert loaded[0]["entry"]["description"] == "Alert when consumer lag grows for five minutes."
    assert loaded[0]["entry"]["tags"] == ["kafka", "alerting"] and loaded[1]["tier"] == "team"
    full = run_json(vault, "search", "kafka consumer lag", "--mode", "full", "--limit", "2")
    assert [set(r) for r in full] == [{"entry", "score", "breakdown", "tier"}] * 2
    assert set(full[0]["breakdown"]) == {*SIGNALS, "total"}
    assert full[0]["entry"] == loaded[0]["entry"]
    assert full[0]["score"] == rows[0]["score"]


def test_filters_and_tiers_through_the_cli(vault: Path):
    rows = run_json(vault, "search", "kafka lag", "--tier", "team,project", "--domain", "streaming",
                    "--severity", "suggestion", "--type", "pattern")
    assert [r["id"] for r in rows] == ["kafka-lag-team"]
    assert run_json(vault, "search", "kafka lag", "--tags", "alerting")[0]["id"] == "kafka-lag"


def test_human_output_is_a_table(vault: Path):
    out = run(vault, "search", "kafka consumer lag").stdout.splitlines()
    assert out[0].split() == ["score", "id", "tier", "type", "severity", "tokens", "title"]
    assert out[1].split()[1] == "kafka-lag"
    full = run(vault, "search", "kafka consumer lag", "--mode", "full", "--limit", "1").stdout
    assert "semantic=" in full and "kafka-lag" in full
    assert "Watch Kafka consumer lag" in run(vault, "load", "kafka-lag").stdout


def test_load_unknown_id_exits_1_after_printing_the_rest(vault: Path):
    proc = run(vault, "load", "kafka-lag", "no-such-id", "--json", code=1)
    rows = json.loads(proc.stdout)
    assert [r["found"] for r in rows] == [True, False]
    assert "no-such-id" in proc.stderr and "Traceback" not in proc.stderr


def test_feedback_and_stats_through_the_cli(vault: Path):
    out = run_json(vault, "feedback", "kafka-lag", "accepted", "--query", "kafka lag")
    assert out["feedback"]["accepted"] == 1 and out["entryId"] == "kafka-lag"
    bad = run(vault, "feedback", "kafka-lag", "loved", "--query", "q", code=2)
    assert "action" in bad.stderr and "accepted" in bad.stderr
    missing = run(vault, "feedback", "nope", "accepted", "--query", "q", code=1)
    assert "nope" in missing.stderr
    stats = run_json(vault, "stats")
    assert list(stats["weights"]) == list(SIGNALS)
    assert sum(stats["weights"].values()) == pytest.approx(1.0, abs=1e-5)
    assert stats["feedback"] == {"accepted": 1, "modified": 0, "dismissed": 0, "failed": 0}
    assert {k: v["entries"] for k, v in stats["tiers"].items()} == {"agent": 1, "project": 1, "team": 41}
    human = run(vault, "stats").stdout
    assert "graphProximity" in human and "agent" in human


def test_memories_with_punctuation_through_the_cli(vault: Path):
    from tiervault.vault.store import TierStore

    with TierStore(vault / "agent.db") as store:
        mem = store.add_memory("Agreed retry policy: three attempts with backoff", topics=["retry"])
    rows = run_json(vault, "search", "what's the retry policy?", "--memories")
    assert rows[0]["id"] == mem and rows[0]["type"] == "memory" and set(rows[0]) == SCAN_KEYS
    assert mem not in [r["id"] for r in run_json(vault, "search", "what's the retry policy?")]


def test_usage_errors_exit_2(vault: Path):
    proc = run(vault, "search", "kafka", "--severity", "fatal", code=2)
    assert "severity" in proc.stderr and "Traceback" not in proc.stderr
    run(vault, "search", "kafka", "--mode", "deep", code=2)
    proc = run(vault, "search", "kafka", "--tier", "nowhere", code=2)
    assert "nowhere" in proc.stderr

"""Load test of ``tiervault serve`` on loopback: concurrent agents through the JSON API.

    python bench/server_load.py [--clients 16] [--requests 500] [--entries 5000]
                                [--json bench/results/server.json]

A real server process on 127.0.0.1 serves a team tier of ``--entries`` synthetic
entries (bench/corpus.py) plus the starter pack. ``--clients`` threads, each with
its own token (agent ``cNN``, ``team:rw``) and keep-alive connection, send
``--requests`` requests each: 80% ``search`` (scan, the fixed query set with its
filters), 10% ``capture`` (a new entry, alternately into the team tier and the
agent's own tier), 10% ``feedback`` (on an id of the client's last search). A
429 is the designed rate limit: the client waits ``Retry-After`` and resends
(counted, not an error). Everything else that is not a 2xx is an error.

After the run every acknowledged capture is loaded back (lost writes must be 0).
The baseline is the same operations in process (a Brain over the same files, one
thread, after the server stopped): the difference is HTTP + JSON + auth + the
lock. Output: a ``server`` section (p50/p95 per operation, in-process p50/p95,
throughput, errors, 429s, lost writes, machine) as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402

from bench import corpus  # noqa: E402
from bench.run import machine_info  # noqa: E402
from serve_process import ServeProcess, create_token, run_cli  # noqa: E402

PACK = ROOT / "vault" / "packs" / "starter.jsonl"


def percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    arr = np.asarray(samples) * 1000.0
    return {"n": len(samples), "p50_ms": round(float(np.percentile(arr, 50)), 2),
            "p95_ms": round(float(np.percentile(arr, 95)), 2),
            "max_ms": round(float(arr.max()), 2)}


class Client(threading.Thread):
    """One agent: its token, its keep-alive connection, its latencies and writes."""

    def __init__(self, n: int, url: str, token: str, queries: list[dict[str, Any]],
                 requests: int, seed: int) -> None:
        super().__init__()
        self.n, self.url, self.token, self.queries, self.requests = n, url, token, queries, requests
        self.rng = random.Random(seed)
        self.latency: dict[str, list[float]] = {"search": [], "capture": [], "feedback": []}
        self.errors: list[str] = []
        self.throttled = 0
        self.acked: list[tuple[str, str]] = []

    def send(self, c: httpx.Client, op: str, method: str, path: str, body: Any) -> httpx.Response | None:
        while True:
            t0 = time.perf_counter()
            try:
                r = c.request(method, path, json=body)
            except httpx.HTTPError as exc:
                self.errors.append(f"{op}: {type(exc).__name__}")
                return None
            if r.status_code == 429:
                self.throttled += 1
                time.sleep(float(r.headers.get("Retry-After", "1")))
                continue
            self.latency[op].append(time.perf_counter() - t0)
            if r.status_code >= 300:
                self.errors.append(f"{op}: {r.status_code} {r.text[:200]}")
                return None
            return r

    def run(self) -> None:
        last_ids: list[str] = []
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=60) as c:
            for i in range(self.requests):
                roll = self.rng.random()
                if roll < 0.8 or (roll >= 0.9 and not last_ids):
                    q = self.queries[self.rng.randrange(len(self.queries))]
                    r = self.send(c, "search", "POST", "/api/v1/search",
                                  {"query": q["text"], **q["filters"]})
                    if r is not None:
                        last_ids = [row["id"] for row in r.json()["results"]]
                elif roll < 0.9:
                    tier = "team" if i % 2 else "agent"
                    eid = f"load-c{self.n:02d}-{i:04d}"
                    r = self.send(c, "capture", "POST", "/api/v1/entries", {"tier": tier, "entries": [{
                        "id": eid, "title": f"Load test lesson {self.n} {i}",
                        "description": "Captured by the server load test; must survive.",
                        "tags": ["load"]}]})
                    if r is not None:
                        self.acked.append((tier, eid))
                else:
                    self.send(c, "feedback", "POST", "/api/v1/feedback",
                              {"query": "load test", "entry_id": self.rng.choice(last_ids),
                               "action": self.rng.choice(["accepted", "dismissed"])})


def lost_writes(url: str, tokens: list[str], clients: list[Client]) -> int:
    lost = 0
    for client in clients:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens[client.n]}"},
                          timeout=60) as c:
            ids = [eid for _, eid in client.acked]
            for i in range(0, len(ids), 100):
                r = c.post("/api/v1/load", json={"ids": ids[i:i + 100]})
                lost += sum(1 for e in r.json()["entries"] if not e["found"])
    return lost


def in_process(root: Path, queries: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """The same operations without HTTP: a Brain over the agent c00's tier and the team tier."""
    from tiervault.brain import Brain
    from tiervault.vault.entry import Entry
    from tiervault.vault.manager import VaultManager

    manager = VaultManager.at({"agent": str(root / ".tiervault-server" / "agents" / "c00.db"),
                               "team": str(root / "team.db")})
    brain = Brain(manager)
    rng = random.Random(1)
    lat: dict[str, list[float]] = {"search": [], "capture": [], "feedback": []}
    ids: list[str] = []
    for q in queries[:20]:  # warm-up, as the server is warm
        brain.search_intelligent(q["text"], **q["filters"])
    for i in range(n):
        q = queries[rng.randrange(len(queries))]
        t0 = time.perf_counter()
        rows = brain.search_intelligent(q["text"], **q["filters"])
        lat["search"].append(time.perf_counter() - t0)
        ids = [r["id"] for r in rows] or ids
        if i % 8 == 0:
            entry = Entry.from_dict({"id": f"inproc-{i}", "title": f"In-process lesson {i}",
                                     "description": "Baseline capture.", "tags": ["load"]})
            t0 = time.perf_counter()
            manager.capture(entry, "team" if i % 16 else "agent")
            lat["capture"].append(time.perf_counter() - t0)
            if ids:
                t0 = time.perf_counter()
                brain.feedback("load test", rng.choice(ids), "accepted")
                lat["feedback"].append(time.perf_counter() - t0)
    manager.close()
    return {op: percentiles(v) for op, v in lat.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=500, help="requests per client")
    parser.add_argument("--entries", type=int, default=5000, help="synthetic team entries")
    parser.add_argument("--solo", type=int, default=300,
                        help="requests of one client alone first (HTTP overhead without queueing)")
    parser.add_argument("--rate", type=float, help="server --rate (default: the server's)")
    parser.add_argument("--json", type=Path, help="write {'server': ...} here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tv-serverbench-") as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        (root / "agent.yaml").write_text("tiers:\n  team: team.db\n")
        data = corpus.generate(2 * args.entries, seed=7)  # half of it lands in the team tier
        jsonl = root / "team.jsonl"
        team_entries = corpus.write_jsonl(data, jsonl, tier="team")
        run_cli(root, "import", str(jsonl), "--tier", "team")
        run_cli(root, "import", str(PACK), "--tier", "team")
        queries = corpus.queries(300, seed=7)
        tokens = [create_token(root, f"c{i:02d}", "team:rw") for i in range(args.clients + 1)]
        extra = ("--rate", str(args.rate)) if args.rate is not None else ()
        with ServeProcess(root, *extra) as srv:
            solo = Client(args.clients, srv.url, tokens[-1], queries, args.solo, seed=100)
            solo.run()
            clients = [Client(i, srv.url, tokens[i], queries, args.requests, seed=i)
                       for i in range(args.clients)]
            t0 = time.perf_counter()
            for c in clients:
                c.start()
            for c in clients:
                c.join()
            wall = time.perf_counter() - t0
            lost = lost_writes(srv.url, tokens, clients + [solo])
        baseline = in_process(root, queries, 400)

    ops = {}
    for op in ("search", "capture", "feedback"):
        ops[op] = {**percentiles([x for c in clients for x in c.latency[op]]),
                   "inproc": baseline[op]}
    total = sum(len(v) for c in clients for v in c.latency.values())
    errors = [e for c in clients + [solo] for e in c.errors]
    result = {"server": {
        "clients": args.clients, "requests_per_client": args.requests,
        "team_entries": team_entries + 210, "requests_completed": total,
        "errors": len(errors), "error_samples": errors[:5],
        "rate_limited_429": sum(c.throttled for c in clients),
        "acknowledged_writes": sum(len(c.acked) for c in clients + [solo]), "lost_writes": lost,
        "wall_s": round(wall, 2), "throughput_rps": round(total / wall, 1),
        "ops": ops, "solo_client": {op: percentiles(solo.latency[op]) for op in solo.latency},
        "rate_limit": f"{args.rate if args.rate is not None else 50:g} requests/s per token, burst 100",
        "machine": machine_info(), "loopback": True,
    }}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if not errors and lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Worker processes for the reliability tests (run as a script, one role per process).

    python vault_worker.py capture DB WORKER N         one capture (one transaction) per entry
    python vault_worker.py search  DB STOPFILE SEED    search until STOPFILE exists

Every role ends by printing one JSON report line on stdout (errors included), so
the test sees what each caller saw: nothing is allowed to vanish into stderr.
The content of a concurrency entry is a pure function of its id (``expected``),
so any process can check that what it reads is whole.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from pathlib import Path

from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters

TIER = "project"


def expected(worker: int, i: int) -> dict:
    """The fields written for entry (worker, i); unique tokens name it in title/description/tags."""
    return {
        "id": f"w{worker}-{i:04d}",
        "title": f"concurrent capture ttl{worker}x{i}",
        "description": (f"Written by worker {worker} as number {i}. desc{worker}x{i} "
                        + "shared filler words for length " * (1 + i % 7)),
        "context": f"ctx{worker}x{i} context text",
        "tags": ["concurrency", f"worker{worker}", f"tag{worker}x{i}"],
        "domain": f"dom{worker}",
        "severity": ("critical", "warning", "suggestion")[i % 3],
    }


def parse_id(entry_id: str) -> tuple[int, int]:
    worker, number = entry_id[1:].split("-")
    return int(worker), int(number)


def intact(entry: Entry) -> str | None:
    """None when ``entry`` holds exactly what its writer wrote, else what differs."""
    want = expected(*parse_id(entry.id))
    got = entry.to_dict()
    for key, value in want.items():
        if got[key] != value:
            return f"{entry.id}: {key} is {got[key]!r}, expected {value!r}"
    if entry.content_hash != entry.compute_hash():
        return f"{entry.id}: content_hash does not match its content"
    return None


def manager(db: str):
    from tiervault.vault.manager import Tier, VaultManager  # scipy etc.: only roles that search

    return VaultManager([Tier(TIER, db, 0.8)])


def run_capture(db: str, worker: int, n: int) -> dict:
    errors: list[str] = []
    written = 0
    slowest = 0.0
    with manager(db) as vm:
        for i in range(n):
            t0 = time.monotonic()
            try:
                stored = vm.capture(Entry.from_dict(expected(worker, i)), TIER)
                problem = intact(stored)
                if problem:
                    errors.append(f"capture returned a different entry: {problem}")
                written += 1
            except Exception as exc:  # noqa: BLE001 - every failure is reported to the test
                errors.append(f"{type(exc).__name__}: {exc}")
            slowest = max(slowest, time.monotonic() - t0)
    return {"role": "capture", "worker": worker, "written": written, "errors": errors[:20],
            "n_errors": len(errors), "slowest_s": round(slowest, 3)}


def run_search(db: str, stop_file: str, seed: int) -> dict:
    rng = random.Random(seed)
    errors: list[str] = []
    searches = hits = checked = 0
    stop = Path(stop_file)
    with manager(db) as vm:
        def one_search() -> None:
            nonlocal searches, hits, checked
            w, i = rng.randrange(8), rng.randrange(1000)
            query = rng.choice([
                "concurrent capture", f"ttl{w}x{i}", f"desc{w}x{i} written worker",
                f"shared filler worker {w}", "length words",
            ])
            result = vm.search(query, tiers=[TIER], limit=20)
            searches += 1
            hits += len(result.ids)
            if not result.ids:
                return
            store = vm.store(TIER)
            found = store.get_many(result.ids)
            for eid in result.ids:
                entry = found.get(eid)
                if entry is None:
                    errors.append(f"search returned {eid} but get() does not find it")
                    continue
                problem = intact(entry)
                if problem:
                    errors.append(f"half-written entry: {problem}")
                    continue
                w2, i2 = parse_id(eid)
                # FTS and entries agree: the FTS index holds this row's description and tags.
                for token in (f"desc{w2}x{i2}", f"tag{w2}x{i2}"):
                    fts = store.search_fts([token], Filters(), 5)
                    if eid not in fts.ids:
                        errors.append(f"{eid} is in entries but FTS does not find {token!r}")
                checked += 1

        one_search()  # the tier may not exist yet: an empty answer
        print("ready", flush=True)
        while not stop.exists():
            try:
                one_search()
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{type(exc).__name__}: {exc}")
        try:  # the writers are done: one last search must see every entry
            one_search()
            final_alive = vm.store(TIER).postings().n_alive
        except Exception as exc:  # noqa: BLE001
            errors.append(f"final: {type(exc).__name__}: {exc}")
            final_alive = -1
    return {"role": "search", "searches": searches, "hits": hits, "checked": checked,
            "errors": errors[:20], "n_errors": len(errors), "final_alive": final_alive}


def main(argv: list[str]) -> int:
    role = argv[1]
    try:
        if role == "capture":
            report = run_capture(argv[2], int(argv[3]), int(argv[4]))
        elif role == "search":
            report = run_search(argv[2], argv[3], int(argv[4]))
        else:
            raise SystemExit(f"unknown role {role!r}")
    except Exception:  # noqa: BLE001 - the report carries the crash
        report = {"role": role, "crash": traceback.format_exc(), "errors": ["crash"], "n_errors": 1}
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

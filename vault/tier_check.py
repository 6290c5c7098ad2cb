"""``tiervault check [--repair]``: verify each tier and rebuild what is derived.

Per tier: SQLite and FTS5 integrity (FTS against its content table), entries with
timestamps the model refuses, stored vectors that cannot be vectors, the search
mirror cache (``<tier>.postings.mirror``, every block checked), the link graph
(``<tier>.links.graph``, every block checked) and every vector cache (``<tier>.vec-*``):
a cache must load, belong to this tier's history and, after catching up, hold
exactly the tier's live entries. With ``repair``: FTS indexes are rebuilt and every
entry moved to a new generation (mirrors rebuild), invalid timestamps fixed, bad
vectors dropped (re-embedded by ``tiervault embed``), bad caches deleted and the
mirror cache written afresh. Nothing a person wrote is changed except timestamps
that could not be read back anyway.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiervault.errors import StorageError, TierVaultError
from tiervault.vault.rows import LinkEnds

__all__ = ["TierCheck", "check_tier"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TierCheck:
    """One tier's findings (``problems``) and what ``repair`` did (``repaired``)."""

    tier: str
    problems: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)  # problems left after a repair

    @property
    def ok(self) -> bool:
        """Healthy now: no problem found, or every one repaired."""
        return not self.problems or (bool(self.repaired) and not self.remaining)

    def as_dict(self) -> dict[str, Any]:
        return {"tier": self.tier, "problems": self.problems, "repaired": self.repaired,
                "remaining": self.remaining}


def _mirror_problem(store: Any) -> str | None:
    """Why the search mirror cache is unusable (None: usable or absent)."""
    from tiervault.vault.postings import Postings

    path = Postings.cache_path(store)
    if path is None or not path.exists():
        return None
    try:
        cached = Postings.load_cache(store)
        if cached is not None:
            cached.verify_all()  # every block, not only those a query would read
            cached.catch_up(store)
    except (StorageError, TierVaultError):
        raise
    except Exception as exc:  # noqa: BLE001 -- reported, never raised: this is the check
        return f"search cache {path.name} is damaged ({type(exc).__name__}: {str(exc)[:120]})"
    if cached is None:
        return f"search cache {path.name} belongs to another tier or history (stale)"
    tier_rows = {(r.id, r.content_hash) for r in store.changes_since(-1).rows}
    ids, hashes = cached.ids.tolist(), cached.hashes.tolist()  # one decode each
    live = {(ids[i], hashes[i]) for i in range(len(ids)) if cached.alive[i]}
    if live != tier_rows:
        return (f"search cache {path.name} disagrees with the tier "
                f"({len(live ^ tier_rows)} entries differ)")
    return None


def _graph_problem(store: Any) -> tuple[Path, str] | None:
    """Why the link graph file (``<tier>.links.graph``) is unusable: damaged (every block
    checked), another tier's, or holding other links than the table while it claims to be
    exact (the links' change count, which schema v6's triggers move at every link row
    changed by anyone, is the graph's). A graph that link changes made stale is not a
    problem: it is never read (vault/link_graph.py)."""
    from tiervault.vault.link_graph import LinkGraph, graph_path

    path = graph_path(store)
    links = getattr(store, "links", None)
    if path is None or links is None or not path.exists():
        return None
    try:
        graph, uid = LinkGraph.load(path)
        held = graph.all_links()
        changes = links.changes_since()
        exact = (changes is not None and changes.gen >= graph.gen
                 and changes.changes == graph.changes and links.counted())
    except (StorageError, TierVaultError):
        raise
    except Exception as exc:  # noqa: BLE001 -- reported, never raised: this is the check
        return path, f"link graph {path.name} is damaged ({type(exc).__name__}: {str(exc)[:120]})"
    if uid != store.uid():
        return path, f"link graph {path.name} belongs to another tier (stale)"
    state = links.state() if exact else None
    table = {LinkEnds._make(row) for row in state.rows} if state is not None else held
    if held != table:
        return path, (f"link graph {path.name} disagrees with the tier's links "
                      f"({len(held ^ table)} links differ)")
    return None


def _vector_problems(store: Any) -> list[tuple[Path, str]]:
    from tiervault.embeddings.recall import read_cache

    out = []
    prefix = store.cache_prefix()
    if prefix is None:
        return []
    for ids_path in sorted(Path(prefix).parent.glob(Path(prefix).name + ".vec-*.ids")):
        try:
            if read_cache(store, ids_path) is None:
                out.append((ids_path, f"vector cache {ids_path.name} belongs to another tier, "
                                      "model or history (stale)"))
        except (StorageError, TierVaultError):
            raise
        except Exception as exc:  # noqa: BLE001 -- reported, never raised: this is the check
            out.append((ids_path, f"vector cache {ids_path.name} is damaged "
                                  f"({type(exc).__name__}: {str(exc)[:120]})"))
    return out


def _remove_vector_cache(ids_path: Path) -> None:
    prefix = ids_path.name[: -len(".ids")]
    for path in [ids_path, *ids_path.parent.glob(prefix + "-*.npy")]:
        path.unlink(missing_ok=True)


def check_tier(store: Any, *, repair: bool = False) -> TierCheck:
    """Check (and with ``repair`` fix) one tier; see the module docstring."""
    result = TierCheck(store.name)
    if not getattr(store, "exists", True):
        return result
    integrity = store.integrity_problems()
    result.problems += [f"integrity: {p}" for p in integrity]
    damaged = store.damaged_rows() if hasattr(store, "damaged_rows") else []
    result.problems += [f"entry {eid!r} holds a timestamp outside years 1-9999" for eid in damaged]
    bad_vectors = store.bad_vectors() if hasattr(store, "bad_vectors") else []
    result.problems += [f"vector of {eid!r} ({model}) is not a finite vector of its dimension"
                        for eid, model in bad_vectors]
    mirror = _mirror_problem(store)
    if mirror:
        result.problems.append(mirror)
    vectors = _vector_problems(store)
    result.problems += [problem for _, problem in vectors]
    graph = _graph_problem(store)
    if graph is not None:
        result.problems.append(graph[1])
    if not repair or not result.problems:
        return result
    if store.read_only:
        result.remaining = list(result.problems)
        result.repaired.append("nothing: the tier is read-only")
        return result
    # Any integrity finding rebuilds the FTS indexes (derived from the tables); damage
    # to the tables themselves is reported as remaining (restore from a backup).
    fts = bool(integrity)
    if fts or damaged or bad_vectors:
        report = store.repair(fts=fts, rows=bool(damaged), vectors=bool(bad_vectors))
        if report.fts_rebuilt:
            result.repaired.append("rebuilt the FTS indexes")
        if report.rows_fixed:
            result.repaired.append(f"fixed the timestamps of {len(report.rows_fixed)} entries")
        if report.vectors_dropped:
            result.repaired.append(f"dropped {report.vectors_dropped} bad vectors "
                                   "(run `tiervault embed` to make them again)")
    for ids_path, _ in vectors:
        _remove_vector_cache(ids_path)
        result.repaired.append(f"deleted {ids_path.name} (rebuilt on the next search)")
    if graph is not None:
        graph[0].unlink(missing_ok=True)
        held = getattr(store, "graph", None)
        if held is not None:
            held.forget()  # this process's copy may be the damaged file's mapping
        result.repaired.append(f"deleted {graph[0].name} (rebuilt on the next search)")
    if mirror or fts or damaged:
        from tiervault.vault.postings import Postings

        Postings.cache_path(store).unlink(missing_ok=True)
        store.postings()  # rebuilds from the tier and writes a fresh cache
        result.repaired.append("rebuilt the search cache")
    after = check_tier(store, repair=False)
    result.remaining = after.problems
    return result

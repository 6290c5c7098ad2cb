"""The vaults a server holds, and each caller's view of them.

Layout. The server's agent.yaml names the *shared* tiers (``project``,
``team`` and read-only ``sources``); they are opened once and shared by every
caller. Its own ``agent`` tier is not served: each token's agent gets its own
agent tier, a file ``<state dir>/agents/<agent id>.db`` (agent ids are
``[a-z0-9][a-z0-9_-]{0,63}``, so an id can never name another path). An agent's
view is a :class:`~tiervault.brain.Brain` over exactly the tiers its token may
read: its own agent tier plus the shared tiers its rights name. A tier it may
read but not write is wrapped in :class:`ReadOnlyView`, so every write path
(JSON API, MCP tools, the web page) meets the same refusal. Another agent's
agent tier is simply not in the view: no request can name it.

Concurrency. One lock serialises every vault call of the process (one SQLite
writer per tier, one mirror per tier); :meth:`VaultHost.call` takes it in a
worker thread with a timeout, after the request body is read and before the
response is written, so a slow client never holds it.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

import anyio
import anyio.to_thread

from tiervault.errors import ReadOnlyTier
from tiervault.server.errors import ApiError
from tiervault.server.principal import Principal
from tiervault.server.tokens import AGENT_ID
from tiervault.vault.wire import WRITE_METHODS as CONTRACT_WRITES

__all__ = ["VaultHost", "ReadOnlyView", "Locked", "WRITE_METHODS"]

log = logging.getLogger("tiervault.server")
T = TypeVar("T")

#: The tier-store methods that change a tier; a read-only view refuses them: every
#: write of the storage contract (as the remote-tier wire lists them) and ``create``.
WRITE_METHODS = frozenset({*CONTRACT_WRITES, "create", "update"})


class ReadOnlyView:
    """A tier store seen through a read-only right: reads pass, writes raise ReadOnlyTier."""

    def __init__(self, store: Any, tier: str) -> None:
        self._store = store
        self._tier = tier

    @property
    def read_only(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        if name in WRITE_METHODS:
            def refuse(*_args: Any, **_kwargs: Any) -> Any:
                raise ReadOnlyTier(self._tier, "token rights",
                                   f"this token may read tier {self._tier!r} but not write it; "
                                   f"ask for a token with {self._tier}:rw")
            return refuse
        return getattr(self._store, name)

    def close(self) -> None:  # the shared store outlives every view
        return None


class Locked:
    """``target`` (a Brain, manager, tier or backend) whose every method call holds ``lock``.

    For callers that use a Brain directly rather than through :meth:`VaultHost.call`
    (the web page): what they reach through it (``brain.manager``, ``manager.tiers``,
    ``tier.store``, ``manager.store(name)``) is wrapped the same way, so no vault
    call of theirs runs beside a JSON API or MCP call.
    """

    def __init__(self, target: Any, lock: Any) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_lock", lock)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return _wrap(value, self._lock)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return _wrap(value(*args, **kwargs), self._lock)
        return call

    def __repr__(self) -> str:
        return f"Locked({self._target!r})"


def _wrap(value: Any, lock: Any) -> Any:
    if isinstance(value, dict) and value and all(hasattr(v, "store") for v in value.values()):
        return {k: Locked(v, lock) for k, v in value.items()}  # manager.tiers
    if any(hasattr(value, marker) for marker in ("search_intelligent", "lexical_query",
                                                  "term_stats", "capture", "store")):
        return Locked(value, lock)
    return value


class VaultHost:
    """Shared tiers, per-agent agent tiers, and one Brain per (agent, rights)."""

    def __init__(self, settings: Any, state_dir: str | Path, *, lock_timeout_s: float = 30.0) -> None:
        from tiervault.vault.manager import Tier, VaultManager

        self.settings = settings
        self.state_dir = Path(state_dir)
        self.agents_dir = self.state_dir / "agents"
        self.lock = threading.RLock()  # re-entrant: Locked proxies may nest
        self.lock_timeout_s = lock_timeout_s
        self._tier_cls = Tier
        self._manager_cls = VaultManager
        shared = [t for t in settings.tiers if t.name != "agent"]
        self.shared = VaultManager(Tier(t.name, t.location, t.weight, t.read_only, config=t)
                                   for t in shared)
        agent_cfg = settings.tier("agent")
        self.agent_weight = agent_cfg.weight if agent_cfg is not None else 1.0
        self._agent_managers: dict[str, Any] = {}
        self._brains: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
        self._cache_lock = threading.Lock()

    # -- views ------------------------------------------------------------------------
    def agent_path(self, agent_id: str) -> Path:
        if not AGENT_ID.fullmatch(agent_id):
            raise ApiError(403, "this token's agent id cannot name an agent tier", field="agent")
        return self.agents_dir / f"{agent_id}.db"

    def _agent_tier(self, agent_id: str) -> Any:
        """The (shared across rights) agent tier of ``agent_id``, opened once."""
        manager = self._agent_managers.get(agent_id)
        if manager is None:
            path = self.agent_path(agent_id)
            manager = self._manager_cls([self._tier_cls("agent", str(path), self.agent_weight)])
            self._agent_managers[agent_id] = manager
        return manager.tiers["agent"]

    def brain_for(self, principal: Principal) -> Any:
        """The Brain over exactly the tiers ``principal`` may read (cached)."""
        from tiervault.brain import Brain

        key = (principal.agent_id, tuple(sorted(principal.rights.items())))
        with self._cache_lock:
            brain = self._brains.get(key)
            if brain is not None:
                return brain
            tiers = []
            if principal.can_read("agent"):
                own = self._agent_tier(principal.agent_id)
                tiers.append(self._view(own, principal))
            for tier in self.shared.tiers.values():
                if principal.can_read(tier.name):
                    tiers.append(self._view(tier, principal))
            brain = Brain(self._manager_cls(tiers), self.settings)
            self._brains[key] = brain
            return brain

    def locked_brain_for(self, principal: Principal) -> Any:
        """:meth:`brain_for` behind the vault lock (for callers outside :meth:`call`)."""
        return Locked(self.brain_for(principal), self.lock)

    def _view(self, tier: Any, principal: Principal) -> Any:
        writable = principal.can_write(tier.name) and not tier.read_only
        store = tier.store
        if store is not None and not writable:
            store = ReadOnlyView(store, tier.name)
        return self._tier_cls(tier.name, tier.path, tier.weight, read_only=not writable,
                              store=store, problem=tier.problem if store is None else None,
                              config=tier.config)

    def tier_names(self) -> list[str]:
        return ["agent", *self.shared.tiers]

    # -- calls ------------------------------------------------------------------------
    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a worker thread holding the vault lock (503 when busy too long)."""
        def locked() -> T:
            if not self.lock.acquire(timeout=self.lock_timeout_s):
                raise ApiError(503, f"the vault is busy (waited {self.lock_timeout_s:g} s); retry")
            try:
                return fn()
            finally:
                self.lock.release()
        return await anyio.to_thread.run_sync(locked)

    def close(self) -> None:
        with self._cache_lock:
            self._brains.clear()
            for manager in self._agent_managers.values():
                manager.close()
            self._agent_managers.clear()
        self.shared.close()

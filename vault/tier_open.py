"""Opening the tiers of a :class:`~tiervault.vault.manager.VaultManager`, and re-opening later.

A tier whose backend cannot be opened (server down, database missing, file
damaged) gets ``problem`` set and stays out of answers; its ``retry``
(:class:`~tiervault.vault.backoff.Backoff`) says when the manager may try
again (:func:`due_for_retry`), so a server that was down at start joins later searches once it is
back, without a restart, and a dead one is not retried on every call.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from tiervault.errors import ConfigError, StorageError, TierError
from tiervault.vault.backend import open_tier

__all__ = ["Opened", "try_open", "due_for_retry", "sqlite_config"]

log = logging.getLogger(__name__)


def sqlite_config(tier: Any) -> Any:
    """The TierConfig of a Tier given only a path (an SQLite file)."""
    from pathlib import Path

    from tiervault.config.settings import TierConfig

    return TierConfig(tier.name, Path(tier.path), tier.weight, tier.read_only)


class Opened(NamedTuple):
    """The outcome of opening a tier: its backend, or why there is none."""

    store: Any
    problem: str | None


def try_open(tier: Any) -> Opened:
    """Open ``tier``'s backend; a failure is recorded in ``tier.retry`` (when to try again)."""
    try:
        store = open_tier(tier.config if tier.config is not None else sqlite_config(tier))
    except (TierError, ConfigError, StorageError) as exc:
        if tier.retry.failures == 0:
            log.warning("skipping tier %r (retried on later calls): %s", tier.name, exc)
        tier.retry.failed(str(exc))
        return Opened(None, str(exc))
    tier.retry.succeeded()
    return Opened(store, None)


def due_for_retry(tier: Any) -> bool:
    """True for a tier that could not be opened and whose backoff allows a new attempt."""
    return tier.store is None and bool(tier.retry.failures) and tier.retry.ready()

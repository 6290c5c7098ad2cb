"""What every storage-contract test file shares (test_tier_contract.py,
test_tier_lexical_contract.py, test_tier_browse_contract.py): a tier of each registered
backend (``tests/backends.py:BACKENDS``) as a fixture, and small builders.

A test module takes the fixtures by importing them (``from tier_contract import tier``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from backends import BACKENDS
from tiervault.vault.backend import TierBackend
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.tokenizer import STEMMER, split_words

__all__ = ["EVERYTHING", "MODEL", "Opener", "entry", "open_tier", "terms_of", "tier"]

Opener = Callable[..., TierBackend]
MODEL = "test:model-4"
EVERYTHING = Filters(include_expired=True, include_future=True)


@pytest.fixture(params=sorted(BACKENDS))
def open_tier(request, tmp_path: Path) -> Iterator[Opener]:
    """open_tier(name="agent", read_only=False): a handle on tier ``name`` of this test."""
    factory = BACKENDS[request.param]

    def opener(name: str = "agent", read_only: bool = False) -> TierBackend:
        backend = factory(request, tmp_path, name=name, read_only=read_only)
        # Registered after the factory's own clean-up: runs before it (LIFO).
        request.addfinalizer(backend.close)
        return backend

    yield opener


@pytest.fixture
def tier(open_tier: Opener) -> TierBackend:
    return open_tier("agent")


def entry(eid: str, title: str = "a title", description: str = "some text", **kw) -> Entry:
    return Entry.create(id=eid, title=title, description=description, **kw)


def terms_of(text: str) -> tuple[list[str], list[str]]:
    """(stems, words) of a query, as VaultManager makes them."""
    words = split_words(text)
    stem = STEMMER.stems(words)
    return list(dict.fromkeys(stem[w] for w in words if stem[w])), words

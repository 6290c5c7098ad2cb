"""Driver errors are mapped at the storage boundary (vault/boundary.py): no raw
``sqlite3.Error`` reaches a caller, and a new backend registers its driver's errors."""

from __future__ import annotations

import sqlite3

import pytest

from tiervault.errors import ReadOnlyTier, StorageError, ValidationError
from tiervault.vault.boundary import ErrorContext, map_errors, register_errors, translate
from tiervault.vault.entry import Entry
from tiervault.vault.store import TierStore


class DriverError(Exception):
    """A stand-in for another driver's base error (psycopg.Error, say)."""


class DriverLost(DriverError):
    """A more specific driver error (a lost connection)."""


def test_a_registered_driver_error_leaves_as_a_tiervault_error():
    register_errors(DriverError, lambda exc, ctx: StorageError(f"{ctx.prefix()}: {exc}"))
    with pytest.raises(StorageError, match=r"tier 'team' \(postgresql://u:\*\*\*@h/db\): search failed: boom") as info:
        with map_errors("team", "postgresql://u:***@h/db", "search"):
            raise DriverError("boom")
    assert isinstance(info.value.__cause__, DriverError)  # the cause stays inspectable


def test_the_most_specific_registration_wins():
    from tiervault.errors import TierUnavailable

    register_errors(DriverError, lambda exc, ctx: StorageError(str(exc)))
    register_errors(DriverLost, lambda exc, ctx: TierUnavailable(ctx.tier, ctx.location, "server gone"))
    ctx = ErrorContext("team", "pg", "read")
    assert isinstance(translate(DriverLost("x"), ctx), TierUnavailable)
    assert type(translate(DriverError("x"), ctx)) is StorageError


def test_tiervault_errors_and_unregistered_errors_pass_through_untouched():
    with pytest.raises(ReadOnlyTier):
        with map_errors("t", "p", "write"):
            raise ReadOnlyTier("t", "p", "is read-only")
    with pytest.raises(KeyError):  # a bug, not a storage failure: not disguised
        with map_errors("t", "p", "read"):
            raise KeyError("k")


def test_values_a_driver_cannot_bind_are_validation_errors():
    with pytest.raises(ValidationError):
        with map_errors("t", "p", "read"):
            "\ud800".encode("utf-8")


def test_sqlite_errors_are_mapped(tmp_path):
    ctx = ErrorContext("agent", str(tmp_path / "a.db"), "write")
    mapped = translate(sqlite3.OperationalError("attempt to write a readonly database"), ctx)
    assert isinstance(mapped, ReadOnlyTier) and "writable" in str(mapped)
    mapped = translate(sqlite3.OperationalError("database is locked"), ctx)
    assert isinstance(mapped, StorageError) and "try again" in str(mapped)
    mapped = translate(sqlite3.DatabaseError("database disk image is malformed"), ctx)
    assert isinstance(mapped, StorageError) and "malformed" in str(mapped)


def test_damage_under_a_read_is_a_storage_error_never_sqlite3(tmp_path):
    path = tmp_path / "a.db"
    with TierStore(path) as store:
        store.capture_many(Entry.create(id=f"e{i}", title=f"title {i}", description="x " * 400)
                           for i in range(300))
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8 * 4096] = b"\x5a" * (8 * 4096)
    path.write_bytes(bytes(data))
    with TierStore(path) as store:
        for read in (lambda: store.list_entries(limit=1000), lambda: store.changes_since(-1),
                     lambda: [e for e in store.iter_entries()]):
            with pytest.raises(StorageError) as info:
                read()
            assert str(path) in str(info.value) and isinstance(info.value.__cause__, sqlite3.Error)

"""The strings a string table looks up in its arrays (not served by its memo): for tests
proving that a search asks a table nothing it already read by slot."""

from __future__ import annotations

from typing import Any

from tiervault.vault.string_table import StringTable


def strings_looked_up(monkeypatch: Any, table: StringTable) -> list[str]:
    """A list that grows with every string ``table`` looks up from now on (the table's
    private look-up wrapped; the patch ends with the test)."""
    looked_up: list[str] = []
    real = StringTable._find

    def find(self: StringTable, strings: list[str]) -> list[list[int]]:
        if self is table:
            looked_up.extend(strings)
        return real(self, strings)
    monkeypatch.setattr(StringTable, "_find", find)
    return looked_up

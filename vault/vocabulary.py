"""The terms of a search mirror: term id <-> stem.

A :class:`Vocabulary` is a :class:`~tiervault.vault.string_table.StringTable`
written with the mirror (term ids are its slots) plus the stems added since, in
plain Python containers (a first build adds every stem; later writes a few).
:class:`Terms` shows it as a sequence of stems by id (``Postings.terms``).
"""

from __future__ import annotations

from typing import Iterator, Sequence

from tiervault.vault.string_table import StringTable

__all__ = ["Terms", "Vocabulary"]


class Vocabulary:
    """The mirror's terms: id -> stem and stem -> id, a table base plus added stems."""

    def __init__(self, base: StringTable | None = None) -> None:
        self.base = base if base is not None else StringTable.build([])
        self.added: list[str] = []
        self._added_ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.base) + len(self.added)

    def term(self, tid: int) -> str:
        n = len(self.base)
        return self.base[tid] if tid < n else self.added[tid - n]

    def ids(self, stems: Sequence[str]) -> list[int | None]:
        """The id of each stem (None: not a term of this mirror)."""
        added = self._added_ids
        if not len(self.base):  # a first build: every term is an added one
            return list(map(added.get, stems))
        out: list[int | None] = []
        found = self.base.find(stems)
        for stem, slots in zip(stems, found):
            out.append(slots[0] if slots else added.get(stem))
        return out

    def get(self, stem: str) -> int | None:
        return self.ids([stem])[0]

    def __getitem__(self, stem: str) -> int:
        tid = self.get(stem)
        if tid is None:
            raise KeyError(stem)
        return tid

    def __contains__(self, stem: object) -> bool:
        return isinstance(stem, str) and self.get(stem) is not None

    def add(self, stem: str) -> int:
        """The id of a stem known not to be a term yet."""
        tid = len(self)
        self.added.append(stem)
        self._added_ids[stem] = tid
        return tid

    def add_many(self, stems: Sequence[str]) -> range:
        """The ids of distinct stems known not to be terms yet (consecutive, in order)."""
        first = len(self)
        self.added.extend(stems)
        self._added_ids.update(zip(stems, range(first, first + len(stems))))
        return range(first, first + len(stems))

    def frozen(self) -> "Vocabulary":
        """The same terms, all in one table (after a full build: no dict of every stem)."""
        if not self.added:
            return self
        return Vocabulary(StringTable.build(self.base.tolist() + self.added))

    def tolist(self) -> list[str]:
        return self.base.tolist() + self.added


class Terms(Sequence[str]):
    """``Postings.terms``: the vocabulary seen as a sequence of stems by id."""

    def __init__(self, vocab: Vocabulary) -> None:
        self._vocab = vocab

    def __len__(self) -> int:
        return len(self._vocab)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return self._vocab.tolist()[i]
        return self._vocab.term(int(i))

    def __iter__(self) -> Iterator[str]:
        return iter(self._vocab.tolist())

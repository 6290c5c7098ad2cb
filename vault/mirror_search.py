"""The lexical half of the tier contract, answered from an in-process mirror.

A SQLite tier (:mod:`store`) and a PostgreSQL tier (``vault/postgres/search.py``) each
keep a :class:`~tiervault.vault.postings.Postings` mirror of their own rows and
answer every lexical contract method from it through a
:class:`~tiervault.vault.lexicon.MirrorLexicon`; :class:`MirrorSearch` is those
answers, written once. A backend that scores elsewhere (the remote tier: its server
does) implements the methods itself and lacks the optional capability below.

Optional capability, not in the protocol (docs/backend.md, "Lexical search"):
``lexical_top_k_slots`` -- a tier's top k as mirror slots and BM25, its hits' ids,
hashes and TF-IDF made only when the federated dedup asks for them
(:class:`~tiervault.vault.lexicon.SlotHits`). Only a tier whose mirror lives in the
searching process can answer so; ``VaultManager`` asks for it where a tier has it
and for ``lexical_top_k`` elsewhere.

Optional capability ``may_hold_pairs`` -- for each of some ids, False when the mirror
proves the row holds, for every given pair of query stems, at most one of its two
(:mod:`~tiervault.vault.stem_presence`): term proximity then reads no text of that row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from tiervault.vault.filters import Filters
from tiervault.vault.stem_presence import may_hold_pairs
from tiervault.vault.rows import IdMask, LexicalHit, TermStats

if TYPE_CHECKING:
    from tiervault.vault.lexicon import MirrorLexicon, SlotHits

__all__ = ["MirrorSearch"]


class MirrorSearch:
    """The contract's lexical methods over ``self.lexicon`` (a :class:`MirrorLexicon` of
    this tier's mirror, which the backend provides: an attribute or a property)."""

    lexicon: "MirrorLexicon"

    def term_stats(self, terms: Sequence[str]) -> TermStats:
        return self.lexicon.term_stats(terms)

    def lexical_top_k(self, terms: Sequence[str], stats: TermStats, filters: Filters, k: int,
                      *, words: Sequence[str] = ()) -> list[LexicalHit]:
        return self.lexicon.lexical_top_k(terms, stats, filters, k, words=words)

    def lexical_top_k_slots(self, terms: Sequence[str], stats: TermStats, filters: Filters, k: int,
                            *, words: Sequence[str] = ()) -> "SlotHits":
        """:meth:`lexical_top_k` as slots and BM25, the hits made when asked (the module
        docstring). An optional capability."""
        return self.lexicon.lexical_top_k_slots(terms, stats, filters, k, words=words)

    def may_hold_pairs(self, ids: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """Per id: may its row hold both stems of one of ``pairs`` (False: proven not,
        by the mirror the search reads; the module docstring). An optional capability."""
        return may_hold_pairs(self.lexicon.mirror(), ids, pairs)

    def lexical_scores(self, terms: Sequence[str], stats: TermStats, *, ids: Sequence[str] = (),
                       hashes: Sequence[str] = (), filters: Filters | None = None,
                       words: Sequence[str] = (), content_hashes: bool = True) -> list[LexicalHit]:
        return self.lexicon.lexical_scores(terms, stats, ids=ids, hashes=hashes, filters=filters,
                                           words=words, content_hashes=content_hashes)

    def lexical_count(self, terms: Sequence[str], filters: Filters, cap: int) -> int:
        return self.lexicon.lexical_count(terms, filters, cap)

    def text_similarity(self, words: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
        return self.lexicon.text_similarity(words, documents)

    def latent_scores(self, words: Sequence[str], ids: Sequence[str], k: int) -> list[float | None]:
        return self.lexicon.latent_scores(words, ids, k)

    def latent_text_scores(self, words: Sequence[str], documents: Sequence[Sequence[str]],
                           k: int) -> list[float | None]:
        return self.lexicon.latent_text_scores(words, documents, k)

    def filter_mask(self, filters: Filters) -> IdMask:
        return self.lexicon.filter_mask(filters)

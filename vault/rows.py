"""Named rows that cross the storage boundary (defined once, used everywhere).

Every value a :class:`~tiervault.vault.backend.TierBackend` hands to the upper
layers (VaultManager, Brain, embeddings, CLI, MCP, HTTP server) is one of these
types, never a positional tuple. Those that are ``NamedTuple`` stay cheap to
build in bulk (the mirror catch-up reads 100,000s of them); callers read them by
field name.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import add
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence, TypedDict

import numpy as np

if TYPE_CHECKING:
    from tiervault.vault.entry import Entry

__all__ = [
    "CommittedBatch",
    "FieldTexts",
    "LightRow",
    "MirrorRow",
    "MirrorRowColumns",
    "Changes",
    "TermStats",
    "LexicalHit",
    "hits_of",
    "Link",
    "LinkEnds",
    "MemoryHit",
    "Memory",
    "FeedbackCounts",
    "FeedbackRow",
    "FeedbackEvent",
    "WeightRecord",
    "VectorRow",
    "VectorChanges",
    "VectorHit",
    "EmbeddingStatus",
    "TierStats",
    "IdMask",
    "KeyColumns",
    "TierHits",
    "LightPage",
    "FacetCounts",
    "TitleRow",
    "EmbeddingCounts",
    "LIGHT_FIELDS",
    "PAGE_ORDERS",
]


class CommittedBatch(NamedTuple):
    """One batch of a ``capture_many`` call, handed to its ``on_batch`` callback once the
    batch's transaction has committed: ``entries`` as the caller gave them (a repeated id
    included), ``written`` how many of them changed, ``total`` how many changed so far in
    this call (this batch included)."""

    entries: list[Entry]
    written: int
    total: int


class FieldTexts(NamedTuple):
    """The text fields of an entry its FTS5 row indexes, in index order (``tags``: the
    space-separated tag text as stored): what term proximity reads (brain/proximity.py)."""

    id: str
    title: str
    description: str
    context: str
    tags: str


class LightRow(NamedTuple):
    """What the Brain's scan path needs of an entry, without its long text.

    ``snippet`` is the first ``snippet_chars`` characters of the description;
    ``chars`` is the total length of the text fields (title, description,
    context, example, counter_example, why): a token estimate is ``chars / 4``.
    ``tags`` is the space-separated tag text (as stored); ``origin`` is last so the
    filter predicate (:func:`~tiervault.vault.filter_compile.matches`) sees every field.
    """

    id: str
    type: str
    domain: str
    severity: str
    title: str
    snippet: str
    tags: str
    created_at: float | None
    updated_at: float | None
    valid_from: float | None
    valid_until: float | None
    content_hash: str
    chars: int
    origin: str


#: LightRow field names, in order.
LIGHT_FIELDS = LightRow._fields

#: Orders of :meth:`TierBackend.light_page`, latest first: ``newest`` by insertion
#: (the row's key; an update keeps it), ``updated`` by the write generation that last
#: changed the entry (ties: latest inserted first).
PAGE_ORDERS = ("newest", "updated")


@dataclass(frozen=True, slots=True)
class LightPage:
    """One page of a tier's entries as light rows, and how many entries pass the filters
    (``total``, for "page 3 of 40"): the curator's browse list."""

    rows: list[LightRow]
    total: int


@dataclass(frozen=True, slots=True)
class FacetCounts:
    """Entries of a tier passing some filters, counted per value of four fields.

    ``by_type`` / ``by_severity`` name every value of ENTRY_TYPES / SEVERITIES in
    that order (0 included); ``by_domain`` / ``by_tag`` only values held, most
    frequent first (ties by value). A tag counts each entry holding it once.
    """

    total: int
    by_type: dict[str, int]
    by_severity: dict[str, int]
    by_domain: dict[str, int]
    by_tag: dict[str, int]


class TitleRow(NamedTuple):
    """An entry's key (as :class:`MirrorRow.key`), id, title and content hash: the
    near-duplicate review reads every entry of a tier this way, without its text."""

    key: int
    id: str
    title: str
    content_hash: str


class MirrorRow(NamedTuple):
    """One entry as the lexical mirror indexes it (the catch-up feed).

    ``key`` is an integer the backend gives the stored row; it is stable while
    the entry lives (an update keeps it) and is what :class:`Changes.deleted`
    reports when the entry is deleted. The text fields are the five FTS columns.
    """

    key: int
    id: str
    content_hash: str
    type: str
    domain: str
    severity: str
    origin: str
    valid_from: float | None
    valid_until: float | None
    updated_at: float | None
    title: str
    description: str
    context: str
    tags: str


@dataclass(frozen=True, slots=True)
class MirrorRowColumns:
    """A chunk of :class:`MirrorRow` s by column: each field of the chunk's rows in row
    order (a first mirror build's reading unit).

    Why columns: the build reads each field across a chunk's rows (the text fields for
    the analysis, the others for the slot columns). Made straight from the driver's
    tuples (:meth:`of`: one ``zip``), no ``MirrorRow`` is made per row nor taken apart
    again per field (1M tiers: ~0.5 s of a first build's CPU; issue 16, session 17)."""

    key: Sequence[int]
    id: Sequence[str]
    content_hash: Sequence[str]
    type: Sequence[str]
    domain: Sequence[str]
    severity: Sequence[str]
    origin: Sequence[str]
    valid_from: Sequence[float | None]
    valid_until: Sequence[float | None]
    updated_at: Sequence[float | None]
    title: Sequence[str]
    description: Sequence[str]
    context: Sequence[str]
    tags: Sequence[str]

    @classmethod
    def of(cls, rows: Sequence[Sequence[Any]]) -> "MirrorRowColumns":
        """The columns of ``rows``: :class:`MirrorRow` s, or a driver's tuples of the same
        fields in the same order (``SELECT`` of the mirror's columns)."""
        return cls(*(list(zip(*rows)) or [()] * len(MirrorRow._fields)))

    def __len__(self) -> int:
        return len(self.key)


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed after a generation, read in one snapshot.

    ``generation`` is the tier's generation the rows reflect (pass it back as
    ``since`` next time); ``rows`` are entries written after ``since`` in
    ascending ``key`` order; ``deleted`` are keys of rows deleted after it.
    With ``since = -1``: every live row, and ``deleted`` is empty.
    """

    generation: int
    rows: list[MirrorRow]
    deleted: list[int]


@dataclass(frozen=True, slots=True)
class TermStats:
    """A tier's BM25 statistics for the terms of one query.

    ``n_docs``: live entries; ``total_len``: sum over them of the token count of
    the five FTS columns (id, title, description, context, tags); ``df``: per
    query term, in the order asked, the live entries containing it.
    Federation adds them up (``a + b``): the sum is what one index holding every
    tier would use, so each tier scores on one scale.
    """

    n_docs: int
    total_len: float
    df: tuple[int, ...]

    @classmethod
    def empty(cls, n_terms: int) -> "TermStats":
        return cls(0, 0.0, (0,) * n_terms)

    def __add__(self, other: "TermStats") -> "TermStats":
        if len(self.df) != len(other.df):
            raise ValueError("TermStats of different queries cannot be added")
        return TermStats(self.n_docs + other.n_docs, self.total_len + other.total_len,
                         tuple(map(add, self.df, other.df)))

    @property
    def avg_len(self) -> float:
        """Mean document length (1.0 for an empty corpus, as the scorer needs a positive value)."""
        return self.total_len / self.n_docs if self.n_docs else 1.0

    def idf(self) -> np.ndarray:
        """FTS5's idf per term under these statistics (read only: the last statistics'
        answer is kept, :func:`~tiervault.vault.scoring.fts5_idf_of`)."""
        from tiervault.vault.scoring import fts5_idf_of

        return fts5_idf_of(self.n_docs, self.df)


class LexicalHit(NamedTuple):
    """One entry's lexical evidence for a query, scored with the statistics given.

    ``score``: raw BM25 (FTS5's definition, field weights, k1 = 1.2, b = 0.75)
    computed with the *global* :class:`TermStats` passed in, > 0 for a match.
    ``tfidf``: cosine between the query's and the entry's TF-IDF vectors under
    the tier's own TF-IDF model, in [0, 1] (0.0 when the backend has none).
    ``passes``: whether the entry passes the filters of the call (True when no
    filters were given).

    A ``NamedTuple`` (session 12): a search builds ~90 a query (3 tiers' top k), in C
    from its columns (``tuple.__new__``, :func:`hits_of`); a frozen dataclass cost
    ~0.45 us each in its ``__init__``.
    """

    id: str
    content_hash: str
    score: float
    tfidf: float = 0.0
    passes: bool = True


def hits_of(ids: Sequence[str], hashes: Sequence[str], scores: Sequence[float],
            tfidf: Sequence[float], passes: Sequence[bool]) -> list[LexicalHit]:
    """``[LexicalHit(ids[i], hashes[i], scores[i], tfidf[i], passes[i]) ...]`` from
    columns of one length, each row made in C (``tuple.__new__`` over the zipped
    columns): no Python call a row."""
    return list(map(tuple.__new__, repeat(LexicalHit), zip(ids, hashes, scores, tfidf, passes)))


@dataclass(frozen=True, slots=True)
class Link:
    """A typed edge between two entries; the target may live in another tier."""

    source_id: str
    target_id: str
    link_type: str
    note: str
    created_at: float
    tier: str


class LinkEnds(NamedTuple):
    """A link's two ends and its type: what graph hops need of a link (no note, time, tier)."""

    source_id: str
    target_id: str
    link_type: str

    @classmethod
    def of(cls, links: Sequence["Link"]) -> list["LinkEnds"]:
        """The ends of full links (what a backend's ``links_touching`` answers)."""
        return [cls(ln.source_id, ln.target_id, ln.link_type) for ln in links]


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A session memory matched by a query; ``score`` is BM25 (higher is better)."""

    id: str
    summary: str
    context: str
    topics: str
    project: str
    created_at: float
    score: float


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored session memory (``list_memories`` / ``get_memories``)."""

    id: str
    summary: str
    context: str
    topics: str
    project: str
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (the ``entry`` shape a full search row gives a memory)."""
        from tiervault.vault.entry import format_timestamp

        return {"id": self.id, "type": "memory", "summary": self.summary,
                "context": self.context, "topics": self.topics.split(), "project": self.project,
                "created_at": format_timestamp(self.created_at)}


class FeedbackCounts(TypedDict):
    """Running counters of feedback actions recorded in a tier."""

    accepted: int
    modified: int
    dismissed: int
    failed: int


class EmbeddingCounts(TypedDict):
    """Entries of a tier by embedding state for one model: ``missing`` have no state
    row (never queued), the others are in that state."""

    pending: int
    ok: int
    error: int
    missing: int


class FeedbackRow(NamedTuple):
    """One recorded feedback action on an entry."""

    entry_id: str
    query: str
    action: str
    created_at: float


class FeedbackEvent(NamedTuple):
    """One recorded feedback action with who gave it and the Brain's context.

    ``agent`` is the agent id ('' for rows recorded before it was kept);
    ``context`` is the JSON text the Brain attached (the entry's signal values
    and the query's relevance profile, tiervault.brain.learning), '' if none."""

    seq: int
    query: str
    entry_id: str
    action: str
    created_at: float
    agent: str
    context: str


class WeightRecord(NamedTuple):
    """One refit of the learned signal weights: when, on how many feedback events /
    preference pairs, and the weights (JSON text written by tiervault.brain.adaptation)."""

    seq: int
    created_at: float
    events: int
    pairs: int
    weights: str


class VectorRow(NamedTuple):
    """A vector to store: the entry, the sha256 of the exact input embedded, the vector."""

    entry_id: str
    input_hash: str
    vector: np.ndarray


@dataclass(frozen=True, slots=True)
class VectorChanges:
    """Vectors of one model written after a generation (one snapshot).

    ``matrix`` is (len(ids), dim) float32 in ``ids`` order; ``deleted`` are ids
    of entries deleted after ``since`` (empty when ``since = -1``).
    """

    generation: int
    ids: list[str]
    matrix: np.ndarray
    deleted: list[str]


@dataclass(frozen=True, slots=True)
class VectorHit:
    """An entry found by vector search: cosine similarity (unit vectors) to the query."""

    id: str
    score: float


class EmbeddingStatus(NamedTuple):
    """Embedding state of one entry for one model."""

    state: str  # pending | ok | error
    error: str
    retries: int


@dataclass(frozen=True, slots=True)
class TierStats:
    """Size of a tier. ``location`` is the path or the URL with secrets removed."""

    location: str
    exists: bool
    entries: int
    links: int
    memories: int
    bytes: int


@dataclass(frozen=True, slots=True)
class IdMask:
    """Which entries of a tier pass some filters, over the tier's id positions.

    ``ids[i]`` is the entry at position i and ``mask[i]`` whether it is live and
    passes. An id may appear at several positions (an updated entry's old
    position), but at most one of them is set in ``mask``. Positions stay the
    same while ``version`` is unchanged, so a caller may cache a map from
    positions to its own rows under that key. Read it right away: ``ids`` may be
    the backend's live list.
    """

    ids: Sequence[str]
    mask: np.ndarray
    version: tuple


class KeyColumns(NamedTuple):
    """A tier's entry ids and content hashes by mirror slot (``TierBackend.key_columns``):
    what the federated dedup's index of the ids and hashes held by more than one tier
    reads (vault/shared_keys.py).

    ``ids[i]`` / ``hashes[i]`` are the id and content hash of slot ``i < slots``, live or
    dead (an updated or deleted entry's slot stays). Within one ``build`` slots are only
    appended and never change; a rebuilt or reloaded mirror has a new ``build`` (numbers
    unique in the process). ``ids`` and ``hashes`` are the mirror's live string
    columns (vault/string_table.py: ``take``, ``held``): read them right away, below
    ``slots`` only."""

    build: int
    ids: Any
    hashes: Any
    slots: int


@dataclass(frozen=True, slots=True)
class TierHits:
    """A ranked answer of a backend's own server-side lexical search (``search_fts``):
    parallel ids and scores, best first."""

    ids: list[str]
    scores: np.ndarray

    @classmethod
    def empty(cls) -> "TierHits":
        return cls([], np.zeros(0, dtype=np.float64))

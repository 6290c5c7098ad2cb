"""Load a BEIR-format test collection in place and map its documents to entries.

Layout (as published by BEIR)::

    DIR/corpus.jsonl[.gz]    {"_id": ..., "title": ..., "text": ..., "metadata": ...}
    DIR/queries.jsonl[.gz]   {"_id": ..., "text": ..., "metadata": ...}
    DIR/qrels/test.tsv       query-id <TAB> corpus-id <TAB> score   (header line)

The data is read where it lies and never copied into the repository: these
collections carry their own licences (SciFact is CC BY-NC).

Document ids are arbitrary strings (uppercase, spaces, slashes...), entry ids
are ``[a-z0-9_.-]{1,128}``; :class:`IdMap` converts both ways so a ranked list
of entry ids can be scored against the qrels.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

from tiervault.errors import ValidationError

__all__ = ["BeirDoc", "BeirCollection", "IdMap", "load", "doc_to_entry", "TITLE_FALLBACK_CHARS"]

TITLE_FALLBACK_CHARS = 80
_MAX_TITLE = 300       # Entry's documented bounds (vault/entry.py)
_MAX_TEXT = 100_000
_VALID_ID = re.compile(r"^[a-z0-9_.-]{1,128}$")
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class BeirDoc:
    """One corpus document as published (no cleaning beyond str coercion)."""

    id: str
    title: str
    text: str


class IdMap:
    """Reversible doc id <-> entry id mapping.

    A doc id that is already a valid entry id and does not start with ``_`` is
    kept as it is (SciFact's numeric ids stay readable). Any other id becomes
    ``_<slug>.<12 hex of sha256>``: the ``_`` prefix keeps it apart from kept
    ids, the hash keeps ``"A"`` and ``"a"`` apart. A collision (astronomically
    unlikely) is an error, never a silent merge.
    """

    def __init__(self) -> None:
        self._to_entry: dict[str, str] = {}
        self._to_doc: dict[str, str] = {}

    @staticmethod
    def encode(doc_id: str) -> str:
        """The entry id for ``doc_id`` (pure function of the doc id)."""
        if _VALID_ID.match(doc_id) and not doc_id.startswith("_"):
            return doc_id
        digest = hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:12]
        slug = _SLUG.sub("-", doc_id.lower()).strip("-")[:100]
        return f"_{slug}.{digest}" if slug else f"_.{digest}"

    def add(self, doc_id: str) -> str:
        """Register ``doc_id``; returns its entry id."""
        known = self._to_entry.get(doc_id)
        if known is not None:
            return known
        entry_id = self.encode(doc_id)
        other = self._to_doc.get(entry_id)
        if other is not None and other != doc_id:
            raise ValidationError("doc_id", f"{doc_id!r} and {other!r} map to the same entry id "
                                  f"{entry_id!r}; rename one of them in the collection")
        self._to_entry[doc_id] = entry_id
        self._to_doc[entry_id] = doc_id
        return entry_id

    def entry_id(self, doc_id: str) -> str:
        """Entry id of a registered doc id (KeyError if unknown)."""
        return self._to_entry[doc_id]

    def doc_id(self, entry_id: str) -> str:
        """Doc id of an entry id produced by this map (KeyError if unknown)."""
        return self._to_doc[entry_id]

    def __len__(self) -> int:
        return len(self._to_entry)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._to_entry


@dataclass
class BeirCollection:
    """A loaded collection: docs, the queries of the split that have qrels, qrels."""

    name: str
    path: Path
    docs: list[BeirDoc]
    queries: dict[str, str]                  # query id -> text (only judged ones)
    qrels: dict[str, dict[str, int]]         # query id -> doc id -> relevance
    ids: IdMap = field(default_factory=IdMap)

    def entries(self, **extra: Any) -> Iterator[dict[str, Any]]:
        """Every doc as an entry dict (see :func:`doc_to_entry`)."""
        for doc in self.docs:
            yield doc_to_entry(doc, self.ids, **extra)

    def run_to_doc_ids(self, run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        """Translate a run keyed by entry ids back to doc ids, for the metrics."""
        return {q: {self.ids.doc_id(e): s for e, s in hits.items()} for q, hits in run.items()}


def _open_text(base: Path, stem: str) -> tuple[IO[str], Path]:
    for name, opener in ((stem, open), (stem + ".gz", gzip.open)):
        path = base / name
        if path.is_file():
            return opener(path, "rt", encoding="utf-8"), path  # type: ignore[operator]
    raise ValidationError("data", f"{base} has neither {stem} nor {stem}.gz; "
                          "expected a BEIR-format collection directory")


def _read_jsonl(base: Path, stem: str) -> Iterator[tuple[dict[str, Any], Path, int]]:
    fh, path = _open_text(base, stem)
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{path}:{lineno}", f"not valid JSON ({exc.msg})") from exc
            if not isinstance(obj, dict) or "_id" not in obj:
                raise ValidationError(f"{path}:{lineno}", 'expected an object with an "_id" key')
            yield obj, path, lineno


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``query-id corpus-id score`` TSV (header optional) -> nested dict."""
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
            if not row or not "".join(row).strip():
                continue
            if lineno == 1 and row[0].strip().lower() in ("query-id", "query_id", "qid"):
                continue
            if len(row) < 3:
                raise ValidationError(f"{path}:{lineno}", f"expected 3 tab-separated columns "
                                      f"(query-id, corpus-id, score), got {len(row)}")
            try:
                score = int(float(row[2]))
            except ValueError:
                raise ValidationError(f"{path}:{lineno}",
                                      f"score {row[2]!r} is not a number") from None
            qrels.setdefault(row[0].strip(), {})[row[1].strip()] = score
    return qrels


def load(path: str | Path, split: str = "test") -> BeirCollection:
    """Read a BEIR collection directory; queries are limited to those judged in ``split``."""
    base = Path(path).expanduser()
    if not base.is_dir():
        raise ValidationError("data", f"{base} is not a directory; pass a BEIR collection "
                              "directory (with corpus.jsonl[.gz], queries.jsonl[.gz], qrels/)")
    qrels_path = base / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise ValidationError("split", f"{qrels_path} does not exist; "
                              f"available: {sorted(p.stem for p in (base / 'qrels').glob('*.tsv'))}")
    qrels = read_qrels(qrels_path)
    ids = IdMap()
    docs: list[BeirDoc] = []
    for obj, file, lineno in _read_jsonl(base, "corpus.jsonl"):
        doc = BeirDoc(_str(obj["_id"]), _str(obj.get("title")), _str(obj.get("text")))
        if doc.id in ids:
            raise ValidationError(f"{file}:{lineno}", f"duplicate document id {doc.id!r}")
        ids.add(doc.id)
        docs.append(doc)
    queries: dict[str, str] = {}
    for obj, _, _ in _read_jsonl(base, "queries.jsonl"):
        qid = _str(obj["_id"])
        if qid in qrels:
            queries[qid] = _str(obj.get("text"))
    missing = [q for q in qrels if q not in queries]
    if missing:
        raise ValidationError("queries", f"{len(missing)} judged queries of {qrels_path} are "
                              f"not in queries.jsonl (first: {missing[0]!r})")
    # Keep qrels in query-file order so reports list queries the same way each run.
    ordered = {q: qrels[q] for q in queries}
    return BeirCollection(base.name, base, docs, queries, ordered, ids)


def doc_to_entry(doc: BeirDoc, ids: IdMap, **extra: Any) -> dict[str, Any]:
    """Entry dict: title -> title (first 80 chars of text if empty), text -> description.

    ``extra`` adds entry fields (``domain``, ``type``, ...). Over-long fields are
    cut to the entry limits; an empty text falls back to the title.
    """
    text = " ".join(doc.text.split())
    title = " ".join(doc.title.split()) or text[:TITLE_FALLBACK_CHARS].strip()
    title = title[:_MAX_TITLE] or doc.id[:_MAX_TITLE]
    description = (text or title)[:_MAX_TEXT]
    return {"id": ids.add(doc.id), "title": title, "description": description, **extra}

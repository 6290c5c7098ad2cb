"""A dev set's queries and grades as written by hand, and the two files made from them.

The judgement scripts of the agent dev sets (``eval/agentset/judgements.py``,
``eval/agentset/ops/judgements.py``) list their queries inline with :meth:`JudgedQueries.q`
and end with :meth:`JudgedQueries.write`, which makes

- ``queries.jsonl``: one ``{"id", "text", "kind", "split"[, "filters"]}`` a line; the id is
  the kind's prefix and its number within the kind (``q01``), and the split alternates
  within each kind (odd numbers "tune", even numbers "report"), so both halves hold every kind;
- ``qrels.tsv``: ``query_id  entry_id  grade`` for every grade above 0.

Every judged entry id must be in the pack (a typo would silently judge nothing).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["Judged", "JudgedQueries", "pack_ids"]


class Judged(NamedTuple):
    """One query as written: its kind, text, filters (or None) and grades by entry id."""

    kind: str
    text: str
    filters: dict[str, Any] | None
    grades: dict[str, int]


def pack_ids(pack: Path) -> set[str]:
    """The entry ids of a JSONL pack (blank lines skipped)."""
    return {json.loads(line)["id"] for line in pack.read_text(encoding="utf-8").splitlines()
            if line.strip()}


class JudgedQueries:
    """The queries of one dev set, in the order written; ``prefix`` maps a kind to its id prefix."""

    def __init__(self, prefix: dict[str, str]) -> None:
        self.prefix = prefix
        self.queries: list[Judged] = []

    def q(self, kind: str, text: str, grades: dict[str, int],
          filters: dict[str, Any] | None = None) -> None:
        """Add one query (``kind`` must have a prefix)."""
        if kind not in self.prefix:
            raise ValueError(f"query kind {kind!r} has no id prefix; use one of {sorted(self.prefix)}")
        self.queries.append(Judged(kind, text, filters, grades))

    def write(self, out: Path, ids: set[str]) -> Counter[str]:
        """Write ``out/queries.jsonl`` and ``out/qrels.tsv``; returns the count per kind.
        A graded id not in ``ids`` raises before anything is written."""
        unknown = sorted({e for j in self.queries for e in j.grades} - ids)
        if unknown:
            raise ValueError(f"graded entries not in the pack: {', '.join(unknown)}; "
                             "fix the id in the judgements or add the entry to the pack")
        counter: Counter[str] = Counter()
        with open(out / "queries.jsonl", "w", encoding="utf-8") as fq, \
                open(out / "qrels.tsv", "w", encoding="utf-8") as fr:
            fr.write("query_id\tentry_id\tgrade\n")
            for judged in self.queries:
                counter[judged.kind] += 1
                n = counter[judged.kind]
                qid = f"{self.prefix[judged.kind]}{n:02d}"
                rec: dict[str, Any] = {"id": qid, "text": judged.text, "kind": judged.kind,
                                       "split": "tune" if n % 2 else "report"}
                if judged.filters:
                    rec["filters"] = judged.filters
                fq.write(json.dumps(rec) + "\n")
                for entry_id, grade in judged.grades.items():
                    if grade > 0:
                        fr.write(f"{qid}\t{entry_id}\t{grade}\n")
        return counter

"""eval.beir_data: BEIR layout loading, id mapping, doc -> entry."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # eval/ is not installed

from eval.beir_data import IdMap, load  # noqa: E402
from tiervault.errors import ValidationError  # noqa: E402
from tiervault.vault.entry import Entry  # noqa: E402

DOCS = [
    {"_id": "12345", "title": "Plain numeric id", "text": "kept as it is"},
    {"_id": "Doc-A", "title": "", "text": "An untitled document whose text is long enough to need "
                                          "cutting at eighty characters for the title fallback."},
    {"_id": "doc-a", "title": "Lowercase twin", "text": "must not collide with Doc-A"},
    {"_id": "a/b c", "title": "Slash and space", "text": "odd characters in the id"},
    {"_id": "_x", "title": "Underscore", "text": "reserved prefix is re-encoded"},
]
QUERIES = [
    {"_id": "q1", "text": "numeric id"},
    {"_id": "q2", "text": "untitled"},
    {"_id": "q9", "text": "not judged in test"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\t12345\t1\nq2\tDoc-A\t2\nq2\ta/b c\t0\n"


def _write(base: Path, *, gz: bool, qrels: str = QRELS, queries=QUERIES) -> Path:
    (base / "qrels").mkdir(parents=True)
    for name, rows in (("corpus.jsonl", DOCS), ("queries.jsonl", queries)):
        text = "".join(json.dumps(r) + "\n" for r in rows)
        if gz:
            with gzip.open(base / (name + ".gz"), "wt", encoding="utf-8") as fh:
                fh.write(text)
        else:
            (base / name).write_text(text, encoding="utf-8")
    (base / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return base


@pytest.mark.parametrize("gz", [False, True])
def test_load_collection(tmp_path, gz):
    coll = load(_write(tmp_path / "mini", gz=gz))
    assert coll.name == "mini"
    assert [d.id for d in coll.docs] == [d["_id"] for d in DOCS]
    assert coll.queries == {"q1": "numeric id", "q2": "untitled"}  # q9 has no qrels
    assert coll.qrels == {"q1": {"12345": 1}, "q2": {"Doc-A": 2, "a/b c": 0}}


def test_entries_validate_and_ids_round_trip(tmp_path):
    coll = load(_write(tmp_path / "mini", gz=False))
    entries = list(coll.entries(domain="scifact"))
    assert len({e["id"] for e in entries}) == len(DOCS)
    for doc, row in zip(coll.docs, entries):
        entry = Entry.from_dict(row)
        assert entry.domain == "scifact"
        assert coll.ids.doc_id(entry.id) == doc.id
        assert coll.ids.entry_id(doc.id) == entry.id
        assert entry.description == doc.text
    assert entries[0]["id"] == "12345"
    untitled = entries[1]
    assert untitled["title"] == DOCS[1]["text"][:80].strip()
    assert entries[1]["id"] != entries[2]["id"] and entries[2]["id"] == "doc-a"
    assert entries[4]["id"] != "_x" and entries[4]["id"].startswith("_")
    # A run keyed by entry ids converts back to doc ids for the metrics.
    run = {"q2": {entries[1]["id"]: 2.0, entries[3]["id"]: 1.0}}
    assert coll.run_to_doc_ids(run) == {"q2": {"Doc-A": 2.0, "a/b c": 1.0}}


def test_idmap_is_a_pure_function_and_never_merges():
    m = IdMap()
    assert m.add("ABC") == IdMap.encode("ABC") == m.add("ABC")
    assert m.add("abc") == "abc" != m.add("ABC")
    assert len(m) == 2 and "ABC" in m


def test_errors_name_file_and_problem(tmp_path):
    with pytest.raises(ValidationError, match="not a directory"):
        load(tmp_path / "nope")
    base = _write(tmp_path / "noq", gz=False, queries=QUERIES[:1])
    with pytest.raises(ValidationError, match="judged queries"):
        load(base)
    base = _write(tmp_path / "badscore", gz=False, qrels="q1\t12345\tyes\n")
    with pytest.raises(ValidationError, match=r"test\.tsv:1"):
        load(base)
    base = _write(tmp_path / "split", gz=False)
    with pytest.raises(ValidationError, match="dev.tsv"):
        load(base, split="dev")
    base = _write(tmp_path / "badjson", gz=False)
    with open(base / "corpus.jsonl", "a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    with pytest.raises(ValidationError, match=r"corpus\.jsonl:6"):
        load(base)


def _scifact() -> Path | None:
    for base in (ROOT.parent / "shared", Path("/work/shared")):
        path = base / "data" / "beir" / "scifact"
        if (path / "qrels" / "test.tsv").is_file():
            return path
    return None


@pytest.mark.skipif(_scifact() is None, reason="SciFact data (shared/data/beir) not present")
def test_scifact_counts():
    coll = load(_scifact())
    assert len(coll.docs) == 5_183
    assert len(coll.queries) == 300
    assert sum(len(v) for v in coll.qrels.values()) == 339
    assert all(d in coll.ids for q in coll.qrels.values() for d in q)


def test_a_half_of_a_collection_carries_its_queries_and_grades(tmp_path):
    """eval/beir.py's beir_half: what the relevance labs run (was the same four lines in
    lexical_lab, lsa_lab and relevance_lab)."""
    from eval.beir import beir_half

    base = _write(tmp_path / "mini", gz=False)
    odd, even, whole = (beir_half(base, h) for h in ("odd", "even", "all"))
    assert odd.queries == {"q1": "numeric id"} and even.queries == {"q2": "untitled"}
    assert [(q.id, q.text, q.filters) for q in even.items] == [("q2", "untitled", {})]
    assert even.qrels == {"q2": {"Doc-A": 2, "a/b c": 0}} and odd.qrels == {"q1": {"12345": 1}}
    assert whole.queries == load(base).queries and len(whole.coll.docs) == len(DOCS)

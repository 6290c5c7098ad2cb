"""PostgreSQL bulk writes: a batch of new ids is COPYed straight into ``entries``.

The direct path (bulk load) and the staging path (a batch that also updates)
must store the same rows: the same terms (FTS5 stems, as :func:`row_terms`
makes them one row at a time), token counts and columns.
"""

from __future__ import annotations

import pytest

from tiervault.vault.entry import Entry
from tiervault.vault.postgres.lexical import batch_terms, row_terms

_ROW = ("SELECT id, type, domain, title, description, context, tags, applies_to, severity, "
        "origin, valid_from, valid_until, created_at, content_hash, doclen, terms::text "
        "FROM entries ORDER BY id")


def _entries(n: int) -> list[Entry]:
    words = ["Retrying", "backoff", "JWT", "tokens", "rotated", "caches", "indexing", "vacuum", "locks",
             "naïve", "Straße", "x-y", "c++", "node.js"]
    return [Entry.create(id=f"b{i:04d}", type=("pattern", "rule")[i % 2],
                         title=f"{words[i % 14]} {words[(i * 3) % 14]} {i}",
                         description=" ".join(words[(i + j) % 14] for j in range(2 + i % 9)),
                         context="" if i % 3 else f"seen in {words[(i * 5) % 14]}",
                         tags=[words[i % 14].lower().replace(".", "")], applies_to=["py"] if i % 4 else [],
                         domain=("net", "db")[i % 2], created_at=1_700_000_000 + i,
                         updated_at=1_700_000_500 + i) for i in range(n)]


def test_bulk_load_and_staged_upsert_store_the_same_rows(pg_tier):
    data = _entries(300)
    direct, staged = pg_tier(), pg_tier()
    assert direct.capture_many(data, batch_size=100) == 300  # 3 batches of new ids: direct COPY
    staged.capture(data[150])  # then every batch holding b0150 goes through the staging table
    assert staged.capture_many(data, batch_size=300) == 299  # b0150 unchanged: skipped
    rows = direct.query(_ROW)
    assert rows == staged.query(_ROW)
    assert len(rows) == 300
    for (eid, *_cols, doclen, terms), e in zip(rows, data):
        stems, count = row_terms((e.id, e.title, e.description, e.context, e.tag_text))
        assert (doclen, sorted(t.strip("'") for t in terms.split(" "))) == (count, stems), eid
    # The mirror fed from the bulk-loaded tier finds what FTS5 stems would find.
    assert direct.term_stats(["retri"]).df[0] == sum("Retrying" in e.title + e.description for e in data)


def test_batch_terms_agree_with_row_terms_on_edge_rows():
    from tiervault.vault.postgres.lexical import MAX_LEXEME_BYTES, tsvector_binary

    long_word = "k" * (MAX_LEXEME_BYTES + 1)  # left out of the tsvector, counted in doclen
    rows = [("a", "", "", "", ""), ("b", "---", "", "", ""), ("c", "Running runs RAN", "ünïcödé", "", "x"),
            ("d", f"keep {long_word}", "", "", ""), ("e", "x " * 400 + "Runs", "", "", ""), ("g", "é" * 600, "", "", "")]
    for batch in (rows, rows[:2] + rows[3:-1]):  # with and without non-ASCII rows (split text by text / at once)
        for fields, (tsv, count), (raw, raw_count) in zip(batch, batch_terms(batch), batch_terms(batch, binary=True)):
            stems, n = row_terms(fields)
            assert count == raw_count == n
            kept = [s for s in stems if s != long_word]
            assert sorted(t.strip("'") for t in tsv.split(" ") if t) == kept
            assert raw == tsvector_binary(stems)
    with_none = [("f", None, "Running", None, "")]  # a missing field counts as empty
    assert batch_terms(with_none, binary=True) == batch_terms([("f", "", "Running", "", "")], binary=True)


def test_a_batch_of_new_and_changed_ids_stores_what_separate_writes_store(pg_tier):
    """New ids are COPYed straight in and only the changed stored entries are staged and
    updated: the same rows as writing the updates and the new ids in separate batches."""
    data = _entries(120)
    changed = [Entry.from_dict({**e.to_dict(), "title": e.title + " revised", "tags": ["moved"]})
               for e in data[10:20]]
    mixed, apart = pg_tier(), pg_tier()
    for tier in (mixed, apart):
        assert tier.capture_many(data[:40], batch_size=100) == 40
    # One batch: 10 changed stored entries, 10 unchanged stored ones, 80 new ids.
    assert mixed.capture_many(changed + data[20:120], batch_size=200) == 90
    assert apart.capture_many(changed, batch_size=200) == 10
    assert apart.capture_many(data[40:120], batch_size=200) == 80
    rows = mixed.query(_ROW)
    assert rows == apart.query(_ROW)
    assert len(rows) == 120
    by_id = {r[0]: r for r in rows}
    for e in changed:
        stems, count = row_terms((e.id, e.title, e.description, e.context, e.tag_text))
        assert by_id[e.id][3] == e.title and by_id[e.id][6] == "moved"
        assert (by_id[e.id][-2], sorted(t.strip("'") for t in by_id[e.id][-1].split(" "))) == (count, stems)
    assert mixed.term_stats(["revis"]).df[0] == 10  # the mirror sees the updated terms


def test_gc_paused_restores_the_collector_as_it_was():
    import gc

    from tiervault.vault.gc_pause import gc_paused

    assert gc.isenabled()
    with pytest.raises(KeyError, match="boom"):
        with gc_paused():
            assert not gc.isenabled()
            raise KeyError("boom")
    assert gc.isenabled()  # back on, even after an error
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off: left off
    finally:
        gc.enable()


def test_binary_tsvector_is_stored_as_the_literal_would_be(pg_tier):
    """A binary COPY of ``tsvector_binary`` stores the same tsvector as the literal does:
    the same lexemes in the same order (so the same bytes on disk), long stems dropped alike."""
    from tiervault.vault.postgres.lexical import MAX_LEXEME_BYTES, tsvector_binary, tsvector_text
    from tiervault.vault.postgres.writer import TSVECTOR_OID, copy_binary

    long_word = "é" * (MAX_LEXEME_BYTES // 2 + 1)  # over the limit in bytes, not in characters
    cases = [[], ["b"], ["zeta", "alpha", "alph", "straße", "naïve", "x9", "ünïcödé", "a"],
             ["keep", long_word, "k" * (MAX_LEXEME_BYTES // 4 + 1)]]
    tier = pg_tier()
    with tier.write("test binary tsvectors") as (conn, _gen):
        conn.execute("CREATE TEMP TABLE tsv_case (n int, v tsvector, w tsvector) ON COMMIT DROP")
        copy_binary(conn, "tsv_case", ("n", "v"), ("int4", TSVECTOR_OID),
                    [(i, tsvector_binary(stems)) for i, stems in enumerate(cases)])
        conn.execute("UPDATE tsv_case SET w = l.lit::tsvector FROM unnest(%s::text[]) WITH ORDINALITY "
                     "AS l(lit, k) WHERE k = n + 1", ([tsvector_text(sorted(stems)) for stems in cases],))
        rows = conn.execute("SELECT n, v::text, tsvectorsend(v) = tsvectorsend(w), "
                            "pg_column_size(v) = pg_column_size(w), length(v) FROM tsv_case ORDER BY n").fetchall()
    assert [r[2:4] for r in rows] == [(True, True)] * len(cases)
    assert [r[4] for r in rows] == [0, 1, 8, 2]  # both over-long stems left out
    assert rows[2][1].startswith("'a' 'alph' 'alpha' 'naïve' 'straße' 'x9' 'zeta' 'ünïcödé'")

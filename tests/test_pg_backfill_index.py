"""``tiervault embed``'s backfill into a PostgreSQL tier builds the HNSW index once, at the end.

``HNSW_MIN_ROWS`` is lowered to 50 for this test (the product's is 10,000), so a
backfill of 400 entries crosses it early, as a 100K backfill crosses 10,000:
while it runs there must be no index (else pgvector maintains the graph row by
row for every later vector); when it ends the index is there and searches read it.
"""

from __future__ import annotations

import numpy as np

from tiervault.embeddings.pipeline import EmbeddingPipeline
from tiervault.embeddings.providers.hash import HashEmbedder
from tiervault.vault.entry import Entry
from tiervault.vault.postgres import vectors as pg_vectors


def _hnsw(store) -> list[str]:
    return [r[0] for r in store.query(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'entry_vectors' "
        "AND indexdef ILIKE '%%USING hnsw%%'", (store.address.schema,))]


def test_backfill_past_the_threshold_builds_the_index_once_at_the_end(pg_tier, monkeypatch):
    monkeypatch.setattr(pg_vectors, "HNSW_MIN_ROWS", 50)
    store = pg_tier()
    store.capture_many([Entry.create(id=f"v{i:04d}", type="rule", title=f"retry backoff note {i}",
                                     description=f"jitter and caps, case {i}") for i in range(400)])
    pipe = EmbeddingPipeline(HashEmbedder(16), batch_size=40)
    seen: list[tuple[int, int, list[str]]] = []

    def progress(done: int, total: int) -> None:
        n = store.query("SELECT count(*) FROM entry_vectors")[0][0]
        seen.append((done, n, _hnsw(store)))

    counts = pipe.backfill(store, on_progress=progress)
    assert counts["embedded"] == 400 and counts["pending"] == 0
    crossed = [s for s in seen if s[1] >= 50]
    assert crossed and all(indexes == [] for _, _, indexes in crossed)  # none on the way
    built = _hnsw(store)
    assert len(built) == 1  # one build, at the end
    query = HashEmbedder(16).embed(["retry backoff"])[0]
    hits = store.vector_search(pipe.model_key, np.asarray(query, dtype=np.float32), 5)
    assert len(hits) == 5
    # A later small write into the indexed tier keeps the index (maintained, not rebuilt).
    store.capture(Entry.create(id="late", type="rule", title="late note", description="after"))
    assert pipe.backfill(store)["embedded"] == 1 and _hnsw(store) == built

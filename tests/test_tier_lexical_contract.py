"""The storage contract's lexical search (docs/backend.md), against every registered
backend: term statistics, top k by the BM25 definition, federated statistics, filters
before k, scores by id and hash, text similarity, latent scores, the filter mask.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from tiervault.errors import ValidationError
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.mirror_search import MirrorSearch
from tiervault.vault.rows import LexicalHit
from tiervault.vault.scoring import B, K1
from tiervault.vault.tokenizer import STEMMER, split_words

from tier_contract import EVERYTHING, entry, open_tier, terms_of, tier  # fixtures and builders

# The definition of the lexical score (docs/backend.md): FTS column -> weight.
WEIGHTS = {"id": 5.0, "title": 10.0, "description": 3.0, "context": 1.0, "tags": 2.0}

CORPUS = [
    dict(id="retry-policy", title="Retry policy for flaky networks",
         description="Retry idempotent calls with exponential backoff and jitter.",
         context="payments service", tags=("retry", "network")),
    dict(id="db-index", title="Index foreign keys",
         description="Every foreign key needs an index or deletes lock the table.",
         context="postgres", tags=("database",)),
    dict(id="retry-storm", title="Avoid retry storms",
         description="Unbounded retries amplify an outage; cap retries and add a circuit breaker.",
         context="network incidents", tags=("retry", "resilience"), type="anti-pattern"),
    dict(id="cache-ttl", title="Short TTL for volatile data",
         description="Cache entries of volatile data expire quickly; retry reads on a miss.",
         context="cache", tags=("cache",)),
    dict(id="log-ids", title="Log request ids",
         description="Every log line carries the request id so one request can be followed.",
         context="observability network", tags=("logging",)),
]


def _columns(fields: dict) -> dict[str, list[str]]:
    """FTS column -> its terms (stems), as the tokenizer defines them."""
    texts = {"id": fields["id"], "title": fields["title"], "description": fields["description"],
             "context": fields.get("context", ""), "tags": " ".join(fields.get("tags", ()))}
    out = {}
    for col, text in texts.items():
        words = split_words(text)
        stem = STEMMER.stems(words)
        out[col] = [stem[w] for w in words if stem[w]]
    return out


def reference_bm25(docs: list[dict], query: str) -> dict[str, float]:
    """BM25 as docs/backend.md defines it, computed from scratch over ``docs``."""
    stems, _ = terms_of(query)
    cols = {d["id"]: _columns(d) for d in docs}
    n = len(docs)
    lengths = {i: sum(len(t) for t in c.values()) for i, c in cols.items()}
    avglen = sum(lengths.values()) / n
    scores = {}
    for eid, c in cols.items():
        score = 0.0
        for term in stems:
            df = sum(1 for cc in cols.values() if any(term in toks for toks in cc.values()))
            idf = math.log((n - df + 0.5) / (df + 0.5))
            idf = 1e-6 if idf <= 0 else idf
            f = sum(WEIGHTS[col] * Counter(toks)[term] for col, toks in c.items())
            if f:
                score += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * lengths[eid] / avglen))
        if score > 0:
            scores[eid] = score
    return scores


def test_term_stats_are_the_tiers_bm25_statistics(tier):
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    stems, _ = terms_of("retry network zebra")
    stats = tier.term_stats(stems)
    cols = [_columns(d) for d in CORPUS]
    assert stats.n_docs == len(CORPUS)
    assert stats.total_len == pytest.approx(sum(len(t) for c in cols for t in c.values()))
    assert stats.df == tuple(sum(1 for c in cols if any(s in t for t in c.values())) for s in stems)
    assert stats.df[-1] == 0


@pytest.mark.parametrize("query", ["retry", "retry network", "index foreign key", "volatile cache retry"])
def test_lexical_top_k_equals_the_bm25_definition(tier, query):
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    stems, words = terms_of(query)
    hits = tier.lexical_top_k(stems, tier.term_stats(stems), EVERYTHING, 10, words=words)
    expected = reference_bm25(CORPUS, query)
    assert {h.id: h.score for h in hits} == pytest.approx(expected, rel=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(isinstance(h, LexicalHit) and 0.0 <= h.tfidf <= 1.0 + 1e-9 for h in hits)


def test_federated_statistics_score_each_tier_as_one_index(open_tier):
    """Two tiers scored with the summed statistics give the single-index scores."""
    a, b = open_tier("agent"), open_tier("team")
    a.capture_many([Entry.create(**d) for d in CORPUS[:2]])
    b.capture_many([Entry.create(**d) for d in CORPUS[2:]])
    query = "retry network"
    stems, words = terms_of(query)
    stats = a.term_stats(stems) + b.term_stats(stems)
    got = {h.id: h.score for t in (a, b) for h in t.lexical_top_k(stems, stats, EVERYTHING, 10, words=words)}
    assert got == pytest.approx(reference_bm25(CORPUS, query), rel=1e-5)


def test_filters_apply_before_k(tier):
    # 30 strong matches of type pattern, then 2 weak ones of type rule: with k = 2
    # and a type filter, the rules must still come back.
    tier.capture_many([entry(f"p{i:02d}", "retry retry retry", "retry") for i in range(30)] +
                      [entry(f"r{i}", "unrelated", "one retry among many other words here",
                             type="rule") for i in range(2)])
    stems, words = terms_of("retry")
    stats = tier.term_stats(stems)
    hits = tier.lexical_top_k(stems, stats, Filters(types=("rule",)), 2, words=words)
    assert sorted(h.id for h in hits) == ["r0", "r1"]
    assert len(tier.lexical_top_k(stems, stats, Filters(), 5)) == 5
    assert tier.lexical_count(stems, Filters(types=("rule",)), cap=1000) == 2
    assert tier.lexical_count(stems, Filters(), cap=1000) == 32


def test_validity_filters(tier):
    now = 2_000_000_000.0
    tier.capture_many([entry("old", "retry", valid_until=now - 10), entry("soon", "retry", valid_from=now + 10),
                       entry("live", "retry")])
    stems, _ = terms_of("retry")
    stats = tier.term_stats(stems)
    ids = lambda f: sorted(h.id for h in tier.lexical_top_k(stems, stats, f, 10))  # noqa: E731
    assert ids(Filters(now=now)) == ["live"]
    assert ids(Filters(now=now, include_expired=True)) == ["live", "old"]
    assert ids(Filters(now=now, include_future=True)) == ["live", "soon"]


def test_lexical_scores_by_id_and_hash_with_the_filter_verdict(tier):
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    stems, words = terms_of("retry")
    stats = tier.term_stats(stems)
    storm_hash = tier.get("retry-storm").content_hash
    found = {h.id: h for h in tier.lexical_scores(stems, stats, ids=["retry-policy", "db-index", "zz"],
                                                  hashes=[storm_hash], filters=Filters(types=("pattern",)),
                                                  words=words)}
    assert set(found) == {"retry-policy", "db-index", "retry-storm"}
    expected = reference_bm25(CORPUS, "retry")
    assert found["retry-policy"].score == pytest.approx(expected["retry-policy"], rel=1e-5)
    assert found["db-index"].score == 0.0
    assert found["retry-policy"].passes and not found["retry-storm"].passes  # an anti-pattern
    assert all(h.passes for h in tier.lexical_scores(stems, stats, ids=["retry-storm"]))


def test_text_similarity_is_a_cosine(tier):
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    sims = tier.text_similarity(["retry", "storms"], [["retry", "storms"], ["postgres"], []])
    assert len(sims) == 3 and all(0.0 <= s <= 1.0 + 1e-9 for s in sims)
    assert sims[1] == 0.0 and sims[2] == 0.0


def test_latent_scores_are_those_of_the_same_rows_in_a_sqlite_file(tier, tmp_path):
    """Latent (LSA) scores are a function of the rows: every backend (a remote tier's
    server over its own mirror too) gives exactly the scores of a SQLite file."""
    from tiervault.vault.store import TierStore

    (tmp_path / "ref").mkdir()
    ref = TierStore(tmp_path / "ref" / "ref.db", name="ref")
    try:
        rows = [Entry.create(**d) for d in CORPUS]
        late = entry("late-retry", "Retry budget", "Cap retries per client with a retry budget.")
        words, ids = ["retry", "network", "outage"], [d["id"] for d in CORPUS] + ["late-retry", "nope"]
        memories = [["retry", "backoff", "payments"], ["index", "postgres"], ["zzz"], []]
        for backend in (tier, ref):
            backend.capture_many(rows)
        got, want = tier.latent_scores(words, ids, 2), ref.latent_scores(words, ids, 2)
        assert got == want and len(got) == len(ids)
        assert all(s is not None and 0.0 <= s <= 1.0 for s in got) and got[-2:] == [0.0, 0.0]
        assert max(got) > 0.5
        text = tier.latent_text_scores(words, memories, 2)
        assert text == ref.latent_text_scores(words, memories, 2) and text[2:] == [0.0, 0.0]
        assert tier.latent_scores(["zzz"], ids, 2) == [0.0] * len(ids)  # no fitted query word
        assert tier.latent_scores(words, [], 2) == [] and tier.latent_text_scores(words, [], 2) == []
        # too small for 50 dimensions: no latent space (None each, JSON null over the wire)
        assert tier.latent_scores(words, ids[:2], 50) == [None, None]
        assert tier.latent_text_scores(words, memories[:1], 50) == [None]
        for backend in (tier, ref):  # a later write is folded into the same space
            backend.capture(late)
        assert tier.latent_scores(words, ids, 2) == ref.latent_scores(words, ids, 2)
        assert tier.latent_scores(words, ["late-retry"], 2)[0] > 0.0
    finally:
        ref.close()


@pytest.mark.parametrize("k", [0, -3, 257, 10**6, True, 2.5, "16"])
def test_latent_scores_refuse_a_dimension_count_out_of_bounds(tier, k):
    """k is the caller's (over HTTP too) and each k is an SVD fit: it is bounded, and a bad
    one is a ValidationError naming k on every backend, never a fit or a traceback."""
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    for call in (lambda: tier.latent_scores(["retry"], [CORPUS[0]["id"]], k),
                 lambda: tier.latent_text_scores(["retry"], [["retry"]], k)):
        with pytest.raises(ValidationError, match="latent dimensions"):
            call()


def test_filter_mask_marks_live_entries_that_pass(tier):
    tier.capture_many([entry("a", type="rule"), entry("b"), entry("c", type="rule")])
    tier.capture(entry("a", "edited", type="rule"))  # an update may leave an old position behind
    view = tier.filter_mask(Filters(types=("rule",)))
    passing = [view.ids[i] for i in np.flatnonzero(view.mask)]
    assert sorted(passing) == ["a", "c"]




def test_key_columns_hold_each_slots_id_and_hash(tier):
    """None (no in-process mirror: a remote tier), or every slot's id and content hash,
    live or dead, slots only appended within a build (the dedup's index, shared_keys.py)."""
    tier.capture_many([entry("a"), entry("b"), entry("c")])
    before = tier.key_columns()
    if before is None:
        return
    tier.capture(entry("a", "edited"))  # an update may leave an old slot behind
    tier.delete("b")
    cols = tier.key_columns()
    slots = list(range(cols.slots))
    ids, hashes = cols.ids.take(slots), cols.hashes.take(slots)
    live = {e.id: e.content_hash for e in tier.get_many(["a", "b", "c"]).values()}
    assert set(zip(ids, hashes)) >= set(live.items())
    if cols.build == before.build:  # (a small tier's mirror is rebuilt by every write)
        assert cols.slots >= before.slots and "b" in ids  # dead slots count too
        assert ids[:before.slots] == before.ids.take(list(range(before.slots)))


def test_lexical_scores_without_content_hashes_answer_the_same(tier):
    """``content_hashes=False`` (a caller reading none: the manager's scores of the pool):
    the same hits, scores, TF-IDF and verdicts; each hash is the entry's or "" (not read).
    A mirror-backed tier reads none."""
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    stems, words = terms_of("retry")
    stats = tier.term_stats(stems)
    ask = dict(ids=["retry-policy", "db-index", "retry-storm", "zz"], filters=Filters(types=("pattern",)),
               words=words)
    full = {h.id: h for h in tier.lexical_scores(stems, stats, **ask)}
    bare = {h.id: h for h in tier.lexical_scores(stems, stats, content_hashes=False, **ask)}
    assert set(bare) == set(full) == {"retry-policy", "db-index", "retry-storm"}
    for eid, h in bare.items():
        assert (h.id, h.score, h.tfidf, h.passes) == (eid, full[eid].score, full[eid].tfidf, full[eid].passes)
        assert h.content_hash in ("", tier.get(eid).content_hash)
    if isinstance(tier, MirrorSearch):
        assert all(h.content_hash == "" for h in bare.values())

"""The curated function-word list of the Brain's lexical leg (issue 10,
tiervault.vault.function_words): negations are never dropped, a query of function
words only is searched whole, and the Brain searches the content words with it on.

Real tier files and the real Brain.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiervault.errors import ValidationError
from tiervault.vault.function_words import FUNCTION_WORDS, NEGATIONS, content_text
from tiervault.vault.query import query_terms

from brain_vault import entry, filler, fixed_brain, vault_at



@pytest.fixture
def manager(tmp_path: Path):
    yield from vault_at(tmp_path, "agent")


def test_no_negation_is_a_function_word():
    assert not FUNCTION_WORDS & NEGATIONS
    for word in NEGATIONS:
        assert word in query_terms(content_text(f"how do I {word} retry the job")), word


def test_function_words_are_dropped_and_content_words_kept_in_order():
    assert content_text("how do I undo a commit that has already been pushed?") == \
        "do undo commit has already been pushed"  # auxiliaries stay (modality, "do not")
    assert content_text("What is the TTL of the DNS cache?") == "is ttl of dns cache"


@pytest.mark.parametrize("apostrophe", ["'", "\u2019"])
@pytest.mark.parametrize("word", ["can", "don", "doesn", "won", "isn", "shouldn", "wouldn"])
def test_a_negative_contraction_survives(apostrophe, word):
    # FTS5 splits "can't" into "can" + "t": that "can" is what matches an entry saying "can't"
    kept = query_terms(content_text(f"why {word}{apostrophe}t the worker reach the db"))
    assert kept == [word, "worker", "reach", "db"]


def test_a_query_without_function_words_or_with_only_them_is_unchanged():
    assert content_text("SKIP LOCKED") == "SKIP LOCKED"
    assert content_text("how and why?") == "how and why?"
    assert content_text("how to do it") == "to do"
    assert content_text("") == ""


def test_the_brain_searches_the_content_words_and_an_all_function_query_still_finds(manager):
    manager.capture_many(filler(30))
    manager.capture_many([
        entry(id="what-how", title="What is it and how to do it", description="What, how, why."),
        entry(id="pool", title="Connection pool size", description="Size the pool per replica.")])
    q = "what should the connection pool size be?"
    off = [r["id"] for r in fixed_brain(manager, query_stopwords="off").search_intelligent(
        q, limit=40)]
    on = [r["id"] for r in fixed_brain(manager, query_stopwords="function").search_intelligent(
        q, limit=40)]
    assert "what-how" in off  # it matched "what", "the", "be"... and nothing else
    assert "what-how" not in on and on[0] == "pool"
    only = fixed_brain(manager, query_stopwords="function").search_intelligent("how and why",
                                                                    limit=40)
    assert [r["id"] for r in only] == ["what-how"]


def test_an_unknown_mode_is_an_error_naming_the_field(manager):
    manager.capture_many(filler(3))
    with pytest.raises(ValidationError, match="query_stopwords"):
        fixed_brain(manager, query_stopwords="klingon").search_intelligent("alpha note")

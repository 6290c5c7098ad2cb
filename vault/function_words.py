"""Function words of a query: what the Brain's lexical (BM25) leg may leave out.

An agent's question ("how do I undo a commit that has already been pushed?") shares
its function words — *how*, *do*, *I*, *a*, *that*, *has*, *been* — with most entries
of a vault. FTS5's idf is floored only for words in more than half of the rows, so in
a vault of a few hundred entries such words still score, and an entry that merely
says "how do I" in its context collects as much BM25 as one naming the commit.

:data:`FUNCTION_WORDS` is a curated list, written here with its reason, of words that
carry grammar and no topic: articles and demonstratives, personal pronouns, question
words and the commonest conjunctions. Auxiliary verbs and prepositions were measured too
and are kept (their reasons below).
It is deliberately not scikit-learn's English list (318 words): that list holds
negations and content-bearing words ("not", "never", "without", "nothing", "after",
"again", "first", "system", "fire", "bill", "find", "call", "move"...), and dropping
those cost the agent dev set's tune half 0.040 nDCG@10 (eval/README.md).

Rules of :func:`content_text`, the query text the lexical leg searches:

- **Negations are never dropped.** No negation is in the list, nor any word a negative
  contraction splits into ("can't" is "can" + "t" for FTS5, "don't" is "don" + "t"):
  tests pin both.
- **A query of function words only is searched whole** ("how to", "what is it"), so
  nothing that matched before becomes an empty search.
- Terms are the same as :func:`tiervault.vault.query.query_terms` gives, so every
  backend (SQLite, PostgreSQL, remote) receives the same text and builds the same
  BM25 query from it; the plain BM25 of ``VaultManager.search`` is untouched.
"""

from __future__ import annotations

from tiervault.vault.query import query_terms

__all__ = ["FUNCTION_WORDS", "NEGATIONS", "AUXILIARIES_KEPT", "PREPOSITIONS_KEPT", "content_text"]

# Grouped by why each word carries no topic. Lowercase, as query_terms yields them
# (one-letter words such as "a" / "i" never reach the query anyway).
_ARTICLES_DETERMINERS = ("an", "the", "this", "that", "these", "those")
_PRONOUNS = ("me", "my", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her",
             "it", "its", "they", "them", "their")
_QUESTION_WORDS = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")
_CONJUNCTIONS = ("and", "or", "but", "if", "than", "so")

# Considered and KEPT in the query (chosen on the agent set's TUNE half + SciFact ODD ids,
# eval/README.md): auxiliaries and modals carry modality and pair with negations ("do not",
# "does not", "must never", "should"), the words rules are written in — dropping them cost
# the agent tune half 0.012 nDCG@10; prepositions form phrasal verbs ("log in", "opt out",
# "back up", "roll back") and dropping them was -0.001 on both tuning halves.
AUXILIARIES_KEPT = ("am", "is", "are", "was", "were", "be", "been", "being", "do", "does",
                    "did", "have", "has", "had", "can", "could", "should", "would", "will",
                    "shall", "may", "might", "must")
PREPOSITIONS_KEPT = ("of", "to", "in", "on", "at", "by", "for", "with", "from", "into", "onto",
                     "about", "as", "via")

#: Words the lexical leg may drop from a query (grammar, no topic).
FUNCTION_WORDS: frozenset[str] = frozenset(
    _ARTICLES_DETERMINERS + _PRONOUNS + _QUESTION_WORDS + _CONJUNCTIONS)

#: Words that turn a query's meaning around; never in FUNCTION_WORDS (pinned by a test).
NEGATIONS: frozenset[str] = frozenset((
    "not", "no", "nor", "never", "none", "nothing", "nobody", "nowhere", "neither",
    "without", "cannot", "cant", "dont", "doesnt", "isnt", "wont", "shouldnt", "except",
    "unless", "against", "instead", "avoid", "stop", "prevent", "only"))


def content_text(text: str) -> str:
    """``text`` without its function words, for the lexical leg; ``text`` itself when it
    has none, or nothing but function words."""
    words = query_terms(text)
    kept = [w for w in words if w not in FUNCTION_WORDS]
    if not kept or len(kept) == len(words):
        return text
    return " ".join(kept)

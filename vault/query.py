"""Query transformation: natural language -> safe FTS5 MATCH expression.

The rules are the reference design's: split on whitespace and punctuation
(hyphens, underscores, dots, slashes, ...), lowercase, strip non-alphanumeric
characters from each term, drop terms shorter than 2 characters, OR-join.
Every term is then double-quoted, so FTS5 sees a string literal and never
syntax: ``NOT``, ``AND``, ``NEAR(``, ``*``, ``:``, ``^`` and ``"`` are words.
"""

from __future__ import annotations

import re

__all__ = ["query_terms", "match_expression", "hashtags", "MAX_QUERY_CHARS", "MAX_QUERY_TERMS"]

#: Documented bounds: longer queries are cut, extra terms dropped (never an error).
MAX_QUERY_CHARS = 4_096
MAX_QUERY_TERMS = 64

# Any run of characters that is neither a letter nor a digit separates terms
# (underscore is a word character for ``\w``, so it is named explicitly).
_SPLIT = re.compile(r"[\W_]+", re.UNICODE)
_HASHTAG = re.compile(r"(?:^|\s)#([^\s#,]{1,64})")


def query_terms(text: str) -> list[str]:
    """Lowercased alphanumeric terms of ``text`` (>= 2 chars), deduplicated, in order."""
    if not text:
        return []
    text = text[:MAX_QUERY_CHARS].replace("\x00", " ")
    seen: dict[str, None] = {}
    # a piece between separators is alphanumeric already: every character ``[\W_]``
    # does not match is one ``str.isalnum`` accepts (both read the same Unicode
    # properties; tests/test_query_terms.py checks every code point)
    for term in _SPLIT.split(text.lower()):
        if len(term) >= 2 and term not in seen:
            seen[term] = None
            if len(seen) >= MAX_QUERY_TERMS:
                break
    return list(seen)


def match_expression(terms: list[str]) -> str:
    """``["jwt", "not"]`` -> ``'"jwt" OR "not"'``; empty string for no terms."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def hashtags(text: str) -> list[str]:
    """Tags written in a query as ``#tag`` words, lowercased, in order."""
    return list(dict.fromkeys(m.lower() for m in _HASHTAG.findall(text or "")))

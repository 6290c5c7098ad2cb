"""FTS5's ``porter`` stemmer for ASCII lower-case words, in Python.

Why: a query word the process has not stemmed yet went to an in-memory FTS5 table
(:class:`~tiervault.vault.tokenizer.Stemmer`): ~0.1 ms a query at the bench, where
most queries hold a word not seen before (issue 16, session 12). A word or two
stemmed here costs a few microseconds. Bulk stemming (a mirror build) stays with
FTS5, which does a word in ~2.3 us.

This follows SQLite's ``fts5_tokenize.c`` rule for rule, NOT Porter's paper: the
mirror must hold exactly the terms FTS5 indexes (a test compares every word of the
bench and SciFact vocabularies, and random words, with FTS5 itself). Its quirks,
kept on purpose:

- a token shorter than 3 or longer than 64 bytes passes through unchanged;
- each step looks only at the suffixes listed for the word's second-to-last
  letter, in the listed order, and stops at the first suffix that matches a word
  strictly longer than it, whether or not its condition holds;
- ``*v*`` (the stem holds a vowel, steps 1b and 1c) counts ``y`` as a vowel
  anywhere but the first letter; the measure ``m`` and ``*o`` count ``y`` as a
  vowel after a consonant (the usual rule);
- digits are consonants.

The measure of a stem: with each letter marked C or V (``y`` a V after a C),
``m`` = the number of V-then-C pairs, i.e. the form ``[C](VC)^m[V]``.
:func:`porter_stem` is only for words of ``[a-z0-9]`` (what unicode61 keeps as
one token, unchanged); the caller routes every other word to FTS5.
"""

from __future__ import annotations

__all__ = ["porter_stem", "PORTER_MIN", "PORTER_MAX"]

#: FTS5's porter passes tokens shorter than this (bytes) through.
PORTER_MIN = 3
#: ... and longer than this (FTS5_PORTER_MAX_TOKEN).
PORTER_MAX = 64

_VOWELS = frozenset("aeiou")


def _measure(stem: str) -> int:
    """``m`` of ``stem`` (module docstring): V-then-C pairs, y a vowel after a C."""
    m = 0
    cons = False  # before the first letter: not a consonant (a leading y is a C)
    prev_vowel = False
    for c in stem:
        cons = not (c in _VOWELS or (c == "y" and cons))
        if cons and prev_vowel:
            m += 1
        prev_vowel = not cons
    return m


def _has_vowel(stem: str) -> bool:
    """``*v*`` as FTS5 tests it: a, e, i, o, u anywhere, or y after the first letter."""
    return any(c in _VOWELS for c in stem) or "y" in stem[1:]


def _cvc(stem: str) -> bool:
    """``*o``: the stem ends consonant-vowel-consonant, the last not w, x or y."""
    if len(stem) < 3 or stem[-1] in "wxy":
        return False
    flags = []
    cons = False
    for c in stem:
        cons = not (c in _VOWELS or (c == "y" and cons))
        flags.append(cons)
    return flags[-3] and not flags[-2] and flags[-1]


def _m_gt0(stem: str) -> bool:
    return _measure(stem) > 0


def _m_gt1(stem: str) -> bool:
    return _measure(stem) > 1


def _m_gt1_s_or_t(stem: str) -> bool:
    return stem[-1:] in ("s", "t") and _measure(stem) > 1


# (suffix, condition on the stem before it, replacement) by the word's second-to-last
# letter, in FTS5's order (the first suffix matching a longer word ends the step)
_STEP2 = {
    "a": (("ational", _m_gt0, "ate"), ("tional", _m_gt0, "tion")),
    "c": (("enci", _m_gt0, "ence"), ("anci", _m_gt0, "ance")),
    "e": (("izer", _m_gt0, "ize"),),
    "g": (("logi", _m_gt0, "log"),),
    "l": (("bli", _m_gt0, "ble"), ("alli", _m_gt0, "al"), ("entli", _m_gt0, "ent"),
          ("eli", _m_gt0, "e"), ("ousli", _m_gt0, "ous")),
    "o": (("ization", _m_gt0, "ize"), ("ation", _m_gt0, "ate"), ("ator", _m_gt0, "ate")),
    "s": (("alism", _m_gt0, "al"), ("iveness", _m_gt0, "ive"), ("fulness", _m_gt0, "ful"),
          ("ousness", _m_gt0, "ous")),
    "t": (("aliti", _m_gt0, "al"), ("iviti", _m_gt0, "ive"), ("biliti", _m_gt0, "ble")),
}
_STEP3 = {
    "a": (("ical", _m_gt0, "ic"),),
    "s": (("ness", _m_gt0, ""),),
    "t": (("icate", _m_gt0, "ic"), ("iciti", _m_gt0, "ic")),
    "u": (("ful", _m_gt0, ""),),
    "v": (("ative", _m_gt0, ""),),
    "z": (("alize", _m_gt0, "al"),),
}
_STEP4 = {
    "a": (("al", _m_gt1, ""),),
    "c": (("ance", _m_gt1, ""), ("ence", _m_gt1, "")),
    "e": (("er", _m_gt1, ""),),
    "i": (("ic", _m_gt1, ""),),
    "l": (("able", _m_gt1, ""), ("ible", _m_gt1, "")),
    "n": (("ant", _m_gt1, ""), ("ement", _m_gt1, ""), ("ment", _m_gt1, ""), ("ent", _m_gt1, "")),
    "o": (("ion", _m_gt1_s_or_t, ""), ("ou", _m_gt1, "")),
    "s": (("ism", _m_gt1, ""),),
    "t": (("ate", _m_gt1, ""), ("iti", _m_gt1, "")),
    "u": (("ous", _m_gt1, ""),),
    "v": (("ive", _m_gt1, ""),),
    "z": (("ize", _m_gt1, ""),),
}
_STEP1B2 = {"a": ("at", "ate"), "b": ("bl", "ble"), "i": ("iz", "ize")}


def _step(w: str, rules: dict) -> str:
    """One of steps 2-4: the first listed suffix that ``w`` ends in (and is longer
    than) is replaced when its condition holds on the stem before it."""
    if len(w) < 2:
        return w
    for suffix, cond, out in rules.get(w[-2], ()):
        n = len(suffix)
        if len(w) > n and w.endswith(suffix):
            stem = w[:-n]
            return stem + out if cond(stem) else w
    return w


def _step1a(w: str) -> str:
    if w[-1] != "s":
        return w
    if w[-2] == "e":
        if (len(w) > 4 and w[-4:-2] == "ss") or (len(w) > 3 and w[-3] == "i"):
            return w[:-2]  # -sses -> -ss, -ies -> -i
        return w[:-1]
    return w if w[-2] == "s" else w[:-1]


def _step1b(w: str) -> tuple[str, bool]:
    """(the word, True when -ed or -ing was removed: step 1b's second part runs)."""
    c = w[-2]
    if c == "e":
        if len(w) > 3 and w.endswith("eed"):
            return (w[:-1], False) if _m_gt0(w[:-3]) else (w, False)
        if len(w) > 2 and w.endswith("ed"):
            return (w[:-2], True) if _has_vowel(w[:-2]) else (w, False)
    elif c == "n" and len(w) > 3 and w.endswith("ing"):
        return (w[:-3], True) if _has_vowel(w[:-3]) else (w, False)
    return w, False


def porter_stem(word: str) -> str:
    """FTS5 ``porter``'s term for an ASCII word of ``[a-z0-9]`` (one unicode61 token,
    as is): the module docstring's rules, step by step as ``fts5_tokenize.c``."""
    if len(word) < PORTER_MIN or len(word) > PORTER_MAX:
        return word
    w = _step1a(word)
    w, removed = _step1b(w)
    if removed:
        rule = _STEP1B2.get(w[-2]) if len(w) > 2 else None
        if rule is not None and w.endswith(rule[0]):
            w = w[:-2] + rule[1]
        else:
            c = w[-1]
            if len(w) > 1 and c not in _VOWELS and c not in "lsz" and c == w[-2]:
                w = w[:-1]  # a double consonant
            elif _measure(w) == 1 and _cvc(w):
                w += "e"
    if w[-1] == "y" and _has_vowel(w[:-1]):
        w = w[:-1] + "i"  # step 1c
    w = _step(_step(_step(w, _STEP2), _STEP3), _STEP4)
    if w[-1] == "e":  # step 5a
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    if len(w) > 1 and w[-1] == "l" and w[-2] == "l" and _measure(w[:-1]) > 1:
        w = w[:-1]  # step 5b
    return w

"""What a caller asks to modulate: the token grammar and its typed equivalent.

Two equal ways in: a token string (CLI ``--modulate``, MCP ``modulate``) and
keyword arguments; both give one frozen :class:`Modulations`. The query text
is never rewritten: modulations travel beside it.

Grammar (tokens separated by spaces; a value with spaces is double-quoted,
as a shell would: ``suppress:"legacy orm"``)::

    suppress:TEXT        demote entries similar to TEXT (several allowed)
    suppress:@ID         ... similar to the entry ID
    centroid:ID,ID[:A]   pull the query toward these entries (A = share of the
                         query kept, default 0.5)
    trajectory:A->B      favour the direction from A to B (each TEXT or @ID)
    decay:DAYS[:exp]     recency: 1/(1+age/DAYS) (default) or 2^(-age/DAYS)
    diverse[:LAMBDA]     MMR re-selection (default lambda 0.7)
    pool:N               candidate pool size (1..5000)

They apply in one fixed order whatever order they are written in: centroid
and trajectory and suppress (one folded matrix-vector product), then decay,
then diverse. An unknown or malformed token is a :class:`QueryError` that
names it.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable

from tiervault.brain.modulation import (
    DEFAULT_CENTROID_ALPHA,
    DEFAULT_DIVERSE_LAMBDA,
)
from tiervault.errors import QueryError

__all__ = ["Target", "Modulations", "parse_modulations", "GRAMMAR", "MAX_POOL",
           "DECAY_KINDS"]

FIELD = "modulate"
MAX_POOL = 5_000
DECAY_KINDS = ("reciprocal", "exp")
_ID_RE = re.compile(r"^[a-z0-9_.-]{1,128}$")
GRAMMAR = ("suppress:TEXT | suppress:@ID | centroid:ID,ID[:ALPHA] | trajectory:A->B | "
           "decay:DAYS[:exp] | diverse[:LAMBDA] | pool:N")


@dataclass(frozen=True)
class Target:
    """A direction's source: a text to embed, or an entry whose vector is used."""

    text: str | None = None
    entry_id: str | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.entry_id is None):
            raise QueryError(FIELD, "a target is either a text or an entry id (@ID)")

    @classmethod
    def parse(cls, raw: str, token: str) -> "Target":
        raw = raw.strip()
        if not raw:
            raise QueryError(FIELD, f"{token!r}: empty target; write TEXT or @ID")
        if raw.startswith("@"):
            return cls(entry_id=_entry_id(raw[1:], token))
        return cls(text=raw)

    def __str__(self) -> str:
        return f"@{self.entry_id}" if self.entry_id is not None else _quote(self.text or "")


@dataclass(frozen=True)
class Modulations:
    """Every modulation of one search (all optional; the empty value changes nothing)."""

    suppress: tuple[Target, ...] = ()
    centroid: tuple[str, ...] = ()
    centroid_alpha: float = DEFAULT_CENTROID_ALPHA
    trajectory: tuple[Target, Target] | None = None
    decay_days: float | None = None
    decay_kind: str = "reciprocal"
    diverse: float | None = None
    pool: int | None = None
    tokens: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.centroid_alpha <= 1.0:
            raise QueryError(FIELD, f"centroid alpha {self.centroid_alpha!r} must be within [0, 1]")
        if self.decay_days is not None and not (math.isfinite(self.decay_days)
                                                and self.decay_days > 0):
            raise QueryError(FIELD, f"decay days {self.decay_days!r} must be a positive number")
        if self.decay_kind not in DECAY_KINDS:
            raise QueryError(FIELD, f"decay kind {self.decay_kind!r} is not one of "
                                    f"{', '.join(DECAY_KINDS)}")
        if self.diverse is not None and not 0.0 <= self.diverse <= 1.0:
            raise QueryError(FIELD, f"diverse lambda {self.diverse!r} must be within [0, 1]")
        if self.pool is not None and not 1 <= self.pool <= MAX_POOL:
            raise QueryError(FIELD, f"pool {self.pool!r} must be an integer from 1 to {MAX_POOL}")

    @property
    def empty(self) -> bool:
        return self == Modulations()

    @property
    def needs_vectors(self) -> tuple[str, ...]:
        """The requested modulations that cannot run without embeddings."""
        need = []
        if any(t.text is not None for t in self.suppress):
            need.append("suppress:TEXT")
        if self.centroid:
            need.append("centroid")
        if self.trajectory is not None:
            need.append("trajectory")
        if self.diverse is not None:
            need.append("diverse")
        return tuple(need)

    @classmethod
    def build(cls, modulate: "str | Modulations | None" = None, **typed: Any) -> "Modulations":
        """Merge a token string (or a value) with typed keyword arguments; a keyword
        given both ways must agree."""
        base = modulate if isinstance(modulate, Modulations) else parse_modulations(modulate)
        if not typed:
            return base
        merged = {**{k: getattr(base, k) for k in _FIELDS}}
        for key, value in typed.items():
            if key not in _FIELDS:
                raise QueryError(FIELD, f"unknown modulation {key!r}; known: {', '.join(_FIELDS)}")
            if value is None:
                continue
            merged[key] = _coerce(key, value)
        return cls(**merged, tokens=base.tokens)

    def __str__(self) -> str:
        parts = [f"suppress:{t}" for t in self.suppress]
        if self.centroid:
            alpha = "" if self.centroid_alpha == DEFAULT_CENTROID_ALPHA else f":{self.centroid_alpha:g}"
            parts.append(f"centroid:{','.join(self.centroid)}{alpha}")
        if self.trajectory is not None:
            parts.append(f"trajectory:{self.trajectory[0]}->{self.trajectory[1]}")
        if self.decay_days is not None:
            kind = ":exp" if self.decay_kind == "exp" else ""
            parts.append(f"decay:{self.decay_days:g}{kind}")
        if self.diverse is not None:
            parts.append("diverse" if self.diverse == DEFAULT_DIVERSE_LAMBDA
                         else f"diverse:{self.diverse:g}")
        if self.pool is not None:
            parts.append(f"pool:{self.pool}")
        return " ".join(parts)


_FIELDS = ("suppress", "centroid", "centroid_alpha", "trajectory", "decay_days", "decay_kind",
           "diverse", "pool")


def parse_modulations(text: str | None) -> Modulations:
    """Parse the token grammar (see the module docstring) into :class:`Modulations`."""
    if text is None:
        return Modulations()
    if not isinstance(text, str):
        raise QueryError(FIELD, f"expected a string of tokens, got {type(text).__name__}")
    try:
        tokens = shlex.split(text, posix=True)
    except ValueError as exc:  # unbalanced quote
        raise QueryError(FIELD, f"{exc}; quote a value with spaces as suppress:\"two words\"") \
            from exc
    out: dict[str, Any] = {"suppress": []}
    for token in tokens:
        name, _, value = token.partition(":")
        handler = _HANDLERS.get(name)
        if handler is None:
            raise QueryError(FIELD, f"unknown token {token!r}; the grammar is {GRAMMAR}")
        if name != "suppress" and name in out:
            raise QueryError(FIELD, f"{name!r} is given twice; give it once")
        handler(token, value, out)
    out["suppress"] = tuple(out["suppress"])
    return Modulations(**out, tokens=tuple(tokens))


def _suppress(token: str, value: str, out: dict[str, Any]) -> None:
    out["suppress"].append(Target.parse(value, token))


def _centroid(token: str, value: str, out: dict[str, Any]) -> None:
    ids, _, alpha = value.partition(":")
    names = [i.strip() for i in ids.split(",") if i.strip()]
    if not names:
        raise QueryError(FIELD, f"{token!r}: give entry ids, as centroid:ID,ID")
    out["centroid"] = tuple(_entry_id(i, token) for i in names)
    if alpha:
        out["centroid_alpha"] = _number(alpha, token)


def _trajectory(token: str, value: str, out: dict[str, Any]) -> None:
    start, arrow, end = value.partition("->")
    if not arrow:
        raise QueryError(FIELD, f"{token!r}: write trajectory:FROM->TO (each TEXT or @ID)")
    out["trajectory"] = (Target.parse(start, token), Target.parse(end, token))


def _decay(token: str, value: str, out: dict[str, Any]) -> None:
    days, _, kind = value.partition(":")
    if not days:
        raise QueryError(FIELD, f"{token!r}: give a half-life in days, as decay:30")
    out["decay_days"] = _number(days, token)
    if kind:
        if kind not in ("exp", "reciprocal"):
            raise QueryError(FIELD, f"{token!r}: the decay kind is 'exp' or 'reciprocal'")
        out["decay_kind"] = kind


def _diverse(token: str, value: str, out: dict[str, Any]) -> None:
    out["diverse"] = _number(value, token) if value else DEFAULT_DIVERSE_LAMBDA


def _pool(token: str, value: str, out: dict[str, Any]) -> None:
    if not value.isdigit():
        raise QueryError(FIELD, f"{token!r}: pool takes a whole number, as pool:200")
    out["pool"] = int(value)


_HANDLERS = {"suppress": _suppress, "centroid": _centroid, "trajectory": _trajectory,
             "decay": _decay, "diverse": _diverse, "pool": _pool}


def _number(raw: str, token: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise QueryError(FIELD, f"{token!r}: {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise QueryError(FIELD, f"{token!r}: {raw!r} is not a finite number")
    return value


def _entry_id(raw: str, token: str) -> str:
    if not _ID_RE.match(raw):
        raise QueryError(FIELD, f"{token!r}: {raw!r} is not an entry id "
                                "(lower-case letters, digits, '.', '_', '-')")
    return raw


def _coerce(key: str, value: Any) -> Any:
    """Typed keyword arguments, checked as strictly as tokens."""
    if key == "suppress":
        items = [value] if isinstance(value, (str, Target)) else list(_iterable(key, value))
        return tuple(v if isinstance(v, Target) else Target.parse(str(v), f"suppress={v!r}")
                     for v in items)
    if key == "centroid":
        items = value.split(",") if isinstance(value, str) else list(_iterable(key, value))
        return tuple(_entry_id(str(i).strip(), f"centroid={value!r}") for i in items)
    if key == "trajectory":
        pair = list(_iterable(key, value))
        if len(pair) != 2:
            raise QueryError(FIELD, "trajectory takes two targets (FROM, TO)")
        return tuple(p if isinstance(p, Target) else Target.parse(str(p), "trajectory")
                     for p in pair)
    if key == "pool":
        if isinstance(value, bool) or not isinstance(value, int):
            raise QueryError(FIELD, f"pool must be an integer, got {value!r}")
        return value
    if key == "decay_kind":
        return str(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise QueryError(FIELD, f"{key} must be a number, got {value!r}")
    return float(value)


def _iterable(key: str, value: Any) -> Iterable[Any]:
    if isinstance(value, (list, tuple)):
        return value
    raise QueryError(FIELD, f"{key} must be a list, got {type(value).__name__}")


def _quote(text: str) -> str:
    return shlex.quote(text)

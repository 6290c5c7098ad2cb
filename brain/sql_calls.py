"""Finding search calls (``vec_search(...)``, ``keyword(...)``) in an agent's SQL.

SQLite has no Python table-valued functions, so the SQL surface runs each
search call first, writes its rows to a temporary table, and hands SQLite the
statement with the call replaced by that table's name. To do that safely this
module *lexes* the statement the way SQLite does (string literals with ``''``
escapes, quoted identifiers, ``--`` and ``/* */`` comments) instead of
matching regular expressions against it, so a call inside a string or a
comment is left alone, and a call's arguments must be literals (a string or a
number): their values are decoded, never spliced back into SQL. The only text
this module ever inserts is a table name it generated itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

from tiervault.errors import QueryError

__all__ = ["Token", "TableCall", "lex", "find_table_calls", "substitute", "one_statement"]

FIELD = "sql"


@dataclass(frozen=True, slots=True)
class Token:
    """One lexical token: ``kind`` is string, ident, quoted, number, comment, space or punct."""

    kind: str
    start: int
    end: int
    value: str | float | int


@dataclass(frozen=True, slots=True)
class TableCall:
    """``name(args...)`` found at ``sql[start:end]``; ``args`` are decoded literals."""

    name: str
    args: tuple[str | int | float, ...]
    start: int
    end: int


_QUOTE_CLOSE = {'"': '"', "`": "`", "[": "]"}


def lex(sql: str) -> list[Token]:
    """SQLite's lexical structure, enough to tell code from literals and comments."""
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            j, parts = i + 1, []
            while True:
                k = sql.find("'", j)
                if k < 0:
                    raise QueryError(FIELD, f"unterminated string literal at character {i + 1}")
                parts.append(sql[j:k])
                if k + 1 < n and sql[k + 1] == "'":
                    parts.append("'")
                    j = k + 2
                    continue
                break
            out.append(Token("string", i, k + 1, "".join(parts)))
            i = k + 1
        elif c in _QUOTE_CLOSE:
            k = sql.find(_QUOTE_CLOSE[c], i + 1)
            if k < 0:
                raise QueryError(FIELD, f"unterminated quoted identifier at character {i + 1}")
            out.append(Token("quoted", i, k + 1, sql[i + 1:k]))
            i = k + 1
        elif sql.startswith("--", i):
            k = sql.find("\n", i)
            k = n if k < 0 else k
            out.append(Token("comment", i, k, ""))
            i = k
        elif sql.startswith("/*", i):
            k = sql.find("*/", i + 2)
            k = n if k < 0 else k + 2
            out.append(Token("comment", i, k, ""))
            i = k
        elif c.isspace():
            k = i
            while k < n and sql[k].isspace():
                k += 1
            out.append(Token("space", i, k, ""))
            i = k
        elif c.isalpha() or c == "_":
            k = i
            while k < n and (sql[k].isalnum() or sql[k] in "_$"):
                k += 1
            out.append(Token("ident", i, k, sql[i:k]))
            i = k
        elif c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit()):
            k = i
            while k < n and (sql[k].isalnum() or sql[k] in ".+-"):
                if sql[k] in "+-" and sql[k - 1] not in "eE":
                    break
                k += 1
            text = sql[i:k]
            try:
                value: int | float = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    raise QueryError(FIELD, f"{text!r} is not a number; write it in decimal "
                                           "(as 16, 1.5 or 2e3)") from None
            out.append(Token("number", i, k, value))
            i = k
        else:
            out.append(Token("punct", i, i + 1, c))
            i += 1
    return out


def _code(tokens: list[Token]) -> list[Token]:
    return [t for t in tokens if t.kind not in ("space", "comment")]


def one_statement(sql: str) -> str:
    """The statement without a trailing ``;``; more than one statement is an error."""
    tokens = _code(lex(sql))
    semis = [t for t in tokens if t.kind == "punct" and t.value == ";"]
    if not semis:
        return sql
    if len(semis) > 1 or semis[0] is not tokens[-1]:
        raise QueryError(FIELD, "give one statement at a time (no ';' between statements)")
    return sql[:semis[0].start]


def find_table_calls(sql: str, names: Collection[str]) -> list[TableCall]:
    """Every ``name(literal, ...)`` call for ``name`` in ``names`` (case-insensitive)."""
    wanted = {n.lower() for n in names}
    code = _code(lex(sql))
    calls: list[TableCall] = []
    i = 0
    while i < len(code):
        tok = code[i]
        if not (tok.kind == "ident" and str(tok.value).lower() in wanted
                and i + 1 < len(code) and code[i + 1].value == "(" and code[i + 1].kind == "punct"):
            i += 1
            continue
        name = str(tok.value).lower()
        args: list[str | int | float] = []
        j = i + 2
        expect_arg = True
        while True:
            if j >= len(code):
                raise QueryError(FIELD, f"{name}(...) is not closed with ')'")
            t = code[j]
            if t.kind == "punct" and t.value == ")" and (not expect_arg or not args):
                break
            if expect_arg:
                sign = 1
                if t.kind == "punct" and t.value == "-" and j + 1 < len(code) \
                        and code[j + 1].kind == "number":
                    sign, j = -1, j + 1
                    t = code[j]
                if t.kind not in ("string", "number"):
                    raise QueryError(FIELD, f"the arguments of {name}() must be literals "
                                            f"('text' or a number); found {_show(sql, t)}")
                args.append(t.value if t.kind == "string" else sign * t.value)  # type: ignore[operator]
                expect_arg = False
            elif t.kind == "punct" and t.value == ",":
                expect_arg = True
            else:
                raise QueryError(FIELD, f"expected ',' or ')' in {name}(...), found {_show(sql, t)}")
            j += 1
        calls.append(TableCall(name, tuple(args), tok.start, code[j].end))
        i = j + 1
    return calls


def substitute(sql: str, calls: list[TableCall], tables: list[str]) -> str:
    """``sql`` with each call replaced by its generated table name.

    ``calls`` must be :func:`find_table_calls` of this same ``sql`` (in order,
    never overlapping: a call's arguments are literals, so calls cannot nest).
    """
    # An internal guard, not a user error: no user input reaches it. The one caller,
    # SqlSurface.run, builds ``tables`` as one generated name per element of ``calls``;
    # what a user writes in the statement changes how many calls there are, never
    # whether the two lists match (a malformed call is a QueryError in
    # find_table_calls first). A mismatch is a programming error in the caller.
    if len(calls) != len(tables):
        raise ValueError(f"substitute() needs one table name per call: {len(calls)} calls, "
                         f"{len(tables)} names (a bug in the caller, not in the SQL)")
    out, pos = [], 0
    for call, table in zip(calls, tables):
        out.append(sql[pos:call.start])
        out.append(table)
        pos = call.end
    out.append(sql[pos:])
    return "".join(out)


def _show(sql: str, tok: Token) -> str:
    return repr(sql[tok.start:tok.end][:40])

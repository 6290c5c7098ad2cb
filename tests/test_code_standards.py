"""Two of the project's code rules, checked on the whole tree by parsing it (ast, tokenize):

1. No exception is swallowed without a reason: an ``except`` whose body is only ``pass``
   (or ``...``) carries a comment saying why, on the ``try`` or ``except`` line or inside
   the handler.
2. No module is past ~500 lines (one concept per module): "~" is read as 520 lines at
   most (a module a few lines past 500 is a warning sign, not yet a failure; one past 520
   must be split by concept), tests, bench and eval scripts included.

Each checker also runs on a planted violation, so the tests cannot pass by finding nothing.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIRS = ("tiervault", "vault", "brain", "embeddings", "config", "bench", "eval", "tests")
MAX_LINES = 520


def python_files() -> list[Path]:
    files = [p for d in DIRS for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts]
    assert len(files) > 300, "the source tree was not found"
    return sorted(files)


def silent_handlers(source: str, name: str) -> list[str]:
    """``file:line: except T`` for each handler that only passes, with no comment."""
    comments = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Try):
            continue
        for handler in node.handlers:
            if not all(isinstance(b, ast.Pass) or (isinstance(b, ast.Expr)
                                                    and isinstance(b.value, ast.Constant)
                                                    and b.value.value is Ellipsis)
                       for b in handler.body):
                continue
            span = {node.lineno, *range(handler.lineno, (handler.end_lineno or handler.lineno) + 1)}
            if not span & comments:
                caught = ast.unparse(handler.type) if handler.type else "everything"
                out.append(f"{name}:{handler.lineno}: except {caught}: pass, without a reason")
    return out


def too_long(source: str, name: str) -> list[str]:
    n = len(source.splitlines())
    return [f"{name}: {n} lines (limit {MAX_LINES}): split it by concept"] if n > MAX_LINES else []


def _scan(checker) -> list[str]:
    out = []
    for path in python_files():
        out.extend(checker(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()))
    return out


def test_no_exception_is_swallowed_without_a_reason():
    assert _scan(silent_handlers) == []


def test_no_module_is_past_the_line_limit():
    assert _scan(too_long) == []


PLANTED = '''
def f(path):
    try:
        path.unlink()
    except OSError:
        pass
    try:
        path.touch()
    except OSError:  # a read-only folder: nothing to do
        pass
    try:
        path.stat()
    except (OSError, ValueError):
        # gone already, which is what we wanted
        ...
    try:
        path.rmdir()
    except:
        ...
'''


def test_the_checkers_find_what_they_look_for():
    found = silent_handlers(PLANTED, "planted.py")
    assert found == ["planted.py:5: except OSError: pass, without a reason",
                     "planted.py:18: except everything: pass, without a reason"]
    assert too_long("x = 1\n" * MAX_LINES, "ok.py") == []
    assert too_long("x = 1\n" * (MAX_LINES + 1), "long.py") == [
        "long.py: 521 lines (limit 520): split it by concept"]

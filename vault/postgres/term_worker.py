"""A term worker process: ``python -m tiervault.vault.postgres.term_worker``.

Reads frames of rows on stdin and answers their terms on stdout (the protocol
is in :mod:`tiervault.vault.postgres.term_workers`); exits when stdin closes.
An error in one request is answered as ``(False, message)`` and the worker goes on.
"""

from __future__ import annotations

import sys

from tiervault.vault.postgres import lexical
from tiervault.vault.postgres.term_workers import read_frame, write_frame
from tiervault.vault.postgres.writer import gc_paused

__all__ = ["main"]


def main() -> int:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    write_frame(out, (True, lexical.__file__))
    while True:
        try:
            rows = read_frame(inp)
        except EOFError:
            return 0
        try:
            with gc_paused():
                answer = (True, lexical.batch_terms(rows, binary=True))
        except Exception as exc:  # answered, not swallowed: the parent raises it
            answer = (False, f"{type(exc).__name__}: {exc}")
        write_frame(out, answer)


if __name__ == "__main__":
    sys.exit(main())

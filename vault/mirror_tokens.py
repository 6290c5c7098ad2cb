"""A first mirror build's tokens, split on the second core: ``python -m tiervault.vault.mirror_tokens``.

Splitting the five FTS columns of every row into words and numbering each chunk's
distinct words is the build's per-token Python work (~120 ns a token, 60+ tokens a
row: about a third of a 1,000,000-entry build, bench/README.md). :func:`tokenise`
does it for one chunk of rows; :func:`chunk_tokens` runs it in one helper process
(the same interpreter and tiervault, checked by a hello) while the building process
does the rest (stems, term ids, sparse sums, slot columns) for the chunk before, so
the two cores overlap. The helper's answer is what :func:`tokenise` returns
in-process (the same function runs there), so the mirror is the same either way.

Protocol on the helper's stdin / stdout: frames of an 8-byte little-endian length
and a :mod:`marshal` payload (our own code in our own interpreter: marshal is safe
and fast for lists of strings). Request: the chunk's five text columns (lists of
str). Reply: ``(True, (distinct words, [int32 positions as bytes] x 5))`` or
``(False, message)``; the first reply is a hello ``(True, path of tokenizer.py)``.
A helper that cannot start, dies or answers an error costs speed only: the
remaining chunks are tokenised in-process, with one warning.
"""

from __future__ import annotations

import itertools
import logging
import marshal
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator, Sequence

import numpy as np

from tiervault.vault import tokenizer
from tiervault.vault.tokenizer import SEP, split_many, split_words

__all__ = ["Tokens", "tokenise", "chunk_tokens", "HelperError", "helper_wanted", "main"]

log = logging.getLogger(__name__)

#: Rows from which a build starts the helper (~0.3 s of CPU to start: imports).
HELPED_ROWS = 100_000


class HelperError(RuntimeError):
    """The token helper could not start, died or answered an error."""


@dataclass(slots=True)
class Tokens:
    """One chunk's words: its distinct words in order of first appearance (the text
    separator :data:`~tiervault.vault.tokenizer.SEP` among them) and, per column, each
    token as the index of its word (separators between consecutive rows' texts)."""

    words: list[str]
    positions: list[np.ndarray]  # int32, one per text column


def _column_words(texts: Sequence[str | None]) -> list[str]:
    texts = [t or "" for t in texts]
    words = split_many(texts)
    if words is None:  # a text holding NUL: split one by one, separators added here
        words = []
        for i, text in enumerate(texts):
            if i:
                words.append(SEP)
            words.extend(w for w in split_words(text) if w != SEP)
    return words


def tokenise(columns: Sequence[Sequence[str | None]]) -> Tokens:
    """The :class:`Tokens` of a chunk's text columns (each a sequence of texts, one a row)."""
    first_at: dict[str, int] = {}
    counter = itertools.count()
    raw = []
    for texts in columns:
        words = _column_words(texts)
        # each token: the position of its word's first token (one dict call per token)
        raw.append(np.fromiter(map(first_at.setdefault, words, counter), dtype=np.int64,
                               count=len(words)))
    dense = np.zeros(next(counter), dtype=np.int32)
    dense[np.fromiter(first_at.values(), dtype=np.int64, count=len(first_at))] = np.arange(
        len(first_at), dtype=np.int32)
    return Tokens(list(first_at), [dense[r] for r in raw])


def _to_wire(t: Tokens) -> tuple[list[str], list[bytes]]:
    return t.words, [p.tobytes() for p in t.positions]


def _from_wire(value: Any) -> Tokens:
    words, positions = value
    return Tokens(words, [np.frombuffer(p, dtype=np.int32) for p in positions])


def write_frame(stream: IO[bytes], value: Any) -> None:
    data = marshal.dumps(value)
    stream.write(len(data).to_bytes(8, "little"))
    stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame's value; EOFError when the stream ends."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("stream closed")
    size = int.from_bytes(head, "little")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("stream closed mid-frame")
    return marshal.loads(data)


def helper_wanted(rows: int) -> bool:
    """A helper for a build of ``rows`` rows: from :data:`HELPED_ROWS` on, with 2+ cores;
    ``TIERVAULT_MIRROR_HELPER=0`` turns it off (1: on for any size, for tests)."""
    env = os.environ.get("TIERVAULT_MIRROR_HELPER", "").strip()
    if env == "0":
        return False
    if env == "1":
        return True
    return rows >= HELPED_ROWS and (os.cpu_count() or 1) >= 2


class _Helper:
    """One helper process: requests written by a thread, answers read in order."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "tiervault.vault.mirror_tokens"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr)
        self.sender: threading.Thread | None = None

    def receive(self) -> Any:
        assert self.proc.stdout is not None
        try:
            ok, value = read_frame(self.proc.stdout)
        except (EOFError, ValueError, OSError) as exc:
            raise HelperError(f"token helper (pid {self.proc.pid}) stopped: {exc}"
                              f"{self._last_words()}") from exc
        if not ok:
            raise HelperError(f"token helper (pid {self.proc.pid}) failed: {value}")
        return value

    def send_all(self, requests: Iterator[Any]) -> None:
        """Write every request from a thread (the pipe blocks while the helper works;
        the caller reads the answers meanwhile), then close stdin: the helper exits."""

        def run() -> None:
            stdin = self.proc.stdin
            assert stdin is not None
            try:
                for request in requests:
                    write_frame(stdin, request)
                stdin.close()
            except (OSError, ValueError):  # the helper died: receive() reports it
                pass

        self.sender = threading.Thread(target=run, name="tiervault-mirror-tokens", daemon=True)
        self.sender.start()

    def _last_words(self) -> str:
        size = os.fstat(self.stderr.fileno()).st_size
        tail = os.pread(self.stderr.fileno(), 500, max(0, size - 500)).decode("utf-8", "replace")
        return f"; its stderr ends: {tail.strip()}" if tail.strip() else ""

    def close(self) -> None:
        for stream in (self.proc.stdout, self.proc.stdin):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()  # only reached early (an error): it holds nothing of ours
        self.proc.wait()
        if self.sender is not None:
            self.sender.join(timeout=5)
        self.stderr.close()


def chunk_tokens(n_chunks: int, columns_of: Callable[[int], Sequence[Sequence[str | None]]],
                 helped: bool) -> Iterator[Tokens]:
    """The :class:`Tokens` of chunks ``0 .. n_chunks - 1`` in order (``columns_of(i)``:
    chunk i's five text columns), from a helper process when ``helped``; a helper that
    fails hands the remaining chunks to this process (one warning)."""
    done = 0
    if helped and n_chunks:
        helper = None
        try:
            helper = _Helper()
            hello = helper.receive()
            if os.path.realpath(hello) != os.path.realpath(tokenizer.__file__):
                raise HelperError(f"token helper imported {hello}, this process "
                                  f"{tokenizer.__file__}: not the same tiervault")
            helper.send_all([list(c) for c in columns_of(i)] for i in range(n_chunks))
            while done < n_chunks:
                tokens = _from_wire(helper.receive())
                done += 1
                yield tokens
        except (HelperError, OSError) as exc:
            log.warning("mirror build: tokenising in this process from chunk %d on (%s)",
                        done, str(exc)[:300])
        finally:
            if helper is not None:
                helper.close()
    for i in range(done, n_chunks):
        yield tokenise(columns_of(i))


def main() -> int:
    """The helper: answer each request frame on stdin with its tokens, until stdin closes."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    write_frame(out, (True, tokenizer.__file__))
    while True:
        try:
            columns = read_frame(inp)
        except EOFError:
            return 0
        try:
            answer = (True, _to_wire(tokenise(columns)))
        except Exception as exc:  # answered, not swallowed: the parent logs it and goes on
            answer = (False, f"{type(exc).__name__}: {exc}")
        write_frame(out, answer)


if __name__ == "__main__":
    sys.exit(main())

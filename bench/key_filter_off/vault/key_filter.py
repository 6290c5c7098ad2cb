"""The key filter switched off: a stand-in for ``vault/key_filter.py`` in an in-scan A/B.

    python bench/scan_swap_ab.py --old bench/key_filter_off --workdir DIR \
        --swap vault/key_filter.py:present --swap vault/key_filter.py:KeyFilter.has \
        --caller tiervault.vault.string_table --caller tiervault.vault.hash_table [--cold] [--flip]

Issue 16, session 11 put a bitmap of the keys' top bits before a string / hash table's
binary search (``vault/key_filter.py``; kept on in-scan A/Bs of -0.15 to -0.21 ms a scan
against the code of then). The tables' ``held()`` has changed since (session 12: a few
strings in plain Python, ``few_keys.held_few``, reading one bit by ``KeyFilter.has``), so
swapping the old ``held()`` back would time more than the filter. This file is the
filter switched off in today's code instead, loaded by ``bench/scan_swap_ab.py`` as the
"old" variant (its ``--old`` root is this folder): ``present`` searches every key (as
before session 11), ``KeyFilter.has`` lets every key through to the ``bisect``. The
answers are the same; only the work differs.
"""

from __future__ import annotations

import numpy as np

from tiervault.vault import key_filter as on

__all__ = ["KeyFilter", "EXTRA_BITS", "present"]

EXTRA_BITS = on.EXTRA_BITS


class KeyFilter(on.KeyFilter):
    """The filter's bitmap is built as before, but no key is decided by it."""

    __slots__ = ()

    def maybe(self, want: np.ndarray) -> np.ndarray:
        return np.ones(len(want), dtype=np.bool_)

    def has(self, key: int) -> bool:
        return True


def present(keys: np.ndarray, key_filter: on.KeyFilter, want: np.ndarray) -> np.ndarray:
    """One binary search of every key (the filter not read): the answer of
    :func:`tiervault.vault.key_filter.present`."""
    return keys.take(np.searchsorted(keys, want, side="left"), mode="clip") == want

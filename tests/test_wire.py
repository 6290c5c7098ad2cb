"""The remote-tier wire format: every contract value survives JSON unchanged, and an
untrusted sender cannot smuggle an invalid entry or an unknown kind through."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tiervault.errors import ValidationError
from tiervault.vault import rows
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.wire import METHODS, decode, encode


def trip(value, *, trusted=True):
    return decode(json.loads(json.dumps(encode(value))), trusted=trusted)


def test_rows_entries_filters_and_arrays_round_trip():
    entry = Entry.from_dict({"id": "e-1", "title": "T", "description": "D", "tags": ["a", "b"],
                             "valid_from": 1.5e9, "created_at": 1_700_000_000.123456})
    values = [
        rows.TermStats(10, 123.25, (1, 0, 7)),
        rows.LexicalHit("e-1", "h" * 64, 3.141592653589793, 0.1 + 0.2, False),
        rows.LightRow("e-1", "rule", "sec", "critical", "T", "snip", "a b", 1.0, 2.0, None, None,
                      "h" * 64, 42, "human"),
        rows.Link("a", "b", "supports", "n", 1.25, "team"),
        rows.FeedbackRow("e-1", "q", "accepted", 3.5),
        rows.TierStats("/x", True, 1, 2, 3, 4),
        rows.VectorHit("e-1", 0.5),
        Filters(types=("rule",), tags=("a",), include_expired=True, now=12.5),
        np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
        {"$t": "entry", "v": {"not": "a tag"}},  # user data that looks like a tag stays data
        [entry, {"e-1": entry}],
    ]
    for value in values:
        back = trip(value)
        if isinstance(value, np.ndarray):
            assert back.dtype == value.dtype and np.array_equal(back, value)
        else:
            assert back == value
            assert type(back) is type(value)
    assert trip(entry).content_hash == entry.content_hash
    assert trip(entry, trusted=False) == entry


def test_untrusted_entries_are_validated_and_unknown_kinds_refused():
    bad = encode(Entry.from_dict({"id": "ok", "title": "T", "description": "D"}))
    bad["v"]["severity"] = "apocalyptic"
    with pytest.raises(ValidationError):
        decode(bad, trusted=False)
    with pytest.raises(ValidationError, match="unknown value kind"):
        decode({"$t": "os.system", "v": {}}, trusted=False)
    with pytest.raises(ValidationError, match="malformed array"):
        decode({"$t": "nd", "dtype": "<f4", "shape": [3], "b64": "!!"}, trusted=False)
    with pytest.raises(ValidationError, match="filter"):
        decode({"$t": "filters", "v": {"evil": 1}}, trusted=False)


def test_every_contract_method_is_forwarded():
    from tiervault.vault.backend import TierBackend

    # create: a server creates its tiers; filter_mask: answered from a local mirror;
    # key_columns: a remote tier has no in-process mirror (None).
    local_only = {"close", "cache_prefix", "location", "iter_entries", "name", "read_only",
                  "create", "filter_mask", "key_columns"}
    contract = {n for n in dir(TierBackend) if not n.startswith("_")}
    assert contract - local_only == set(METHODS)

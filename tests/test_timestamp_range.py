"""The storable timestamp range (years 1..9999 UTC) at its float edges: every value the
model accepts writes back as ISO 8601 and reads back as the same float; every value it
refuses names the field. Found by hypothesis: 253402300800.0 (10000-01-01) was accepted
because the last microsecond of 9999 rounds up to it as a float."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiervault.errors import ValidationError
from tiervault.vault.entry import (MAX_TIMESTAMP, MIN_TIMESTAMP, format_timestamp,
                                   parse_timestamp, valid_timestamp)

EDGE = 253402300800.0  # 10000-01-01T00:00:00Z


def _near(x: float, spread: float) -> st.SearchStrategy[float]:
    return st.floats(min_value=x - spread, max_value=x + spread, allow_nan=False)


@given(ts=st.one_of(_near(EDGE, 0.01), _near(MIN_TIMESTAMP, 0.01), _near(EDGE, 2.0),
                    st.sampled_from([EDGE, MAX_TIMESTAMP, MIN_TIMESTAMP,
                                     math.nextafter(MIN_TIMESTAMP, -math.inf)])))
def test_an_accepted_timestamp_writes_back_and_reads_back_the_same(ts: float) -> None:
    try:
        got = parse_timestamp(ts, "created_at")
    except ValidationError as exc:
        assert "created_at" in str(exc)
        assert not (MIN_TIMESTAMP <= round(ts, 6) <= MAX_TIMESTAMP)
        return
    assert valid_timestamp(got)
    text = format_timestamp(got)
    assert text is not None and not text.startswith("10000")
    assert parse_timestamp(text, "created_at") == got


@pytest.mark.parametrize("value", [EDGE, str(EDGE), "10000-01-01T00:00:00Z", 253402300799.9999999])
def test_year_10000_is_refused_naming_the_field(value) -> None:
    with pytest.raises(ValidationError, match="valid_until"):
        parse_timestamp(value, "valid_until")

"""Validation in bulk (vault/entry_bulk.py) is ``Entry.from_dict`` one record at a time:
the same entries, the same content hashes and timestamps to the bit, the same error
message for every bad record, whichever mix of records a batch holds."""

from __future__ import annotations

import copy
import json
import math
import random
from datetime import datetime, timedelta, timezone

import pytest

from bench.corpus import generate
from tiervault.errors import ValidationError
from tiervault.vault.entry import Entry, format_timestamp, parse_timestamp
from tiervault.vault.entry_bulk import validate_many
from tiervault.vault.jsonl import parse_lines


def _reference(record):
    try:
        return Entry.from_dict(record)
    except ValidationError as exc:
        return exc


def _same(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, Entry):
            assert isinstance(g, Entry) and g == w and g.content_hash == w.content_hash
            for name in ("valid_from", "valid_until", "created_at", "updated_at"):
                a, b = getattr(g, name), getattr(w, name)
                assert a == b and type(a) is type(b), name  # bit for bit, float or None
        else:
            assert type(g) is type(w) and str(g) == str(w)


def _odd_time(rng: random.Random):
    ts = rng.uniform(-2e9, 4e9)
    return rng.choice([
        None, "", format_timestamp(round(ts)), format_timestamp(round(ts, 6)), round(ts, 3),
        int(ts), str(round(ts, 2)), " 2024-05-01T10:00:00Z ", "2024-05-01T10:00:00+02:00",
        "2024-05-01T10:00:00.5Z", "2024-05-01", "2024-05-01T10:00:00", "0000-01-01T00:00:00Z",
        "2023-02-29T00:00:00Z", "2024-04-31T00:00:00Z", "2024-01-01T24:00:00Z",
        "9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00Z", "1600-02-29T12:00:00Z",
        True, float("nan"), 1e300, "soon", [], {"t": 1},
    ])


def _mutate(record: dict, rng: random.Random) -> dict:
    """A record with one or two fields made odd: valid variants and invalid ones."""
    r = copy.deepcopy(record)
    for _ in range(rng.randint(1, 2)):
        field = rng.choice(["id", "title", "description", "context", "domain", "type",
                            "severity", "origin", "tags", "applies_to", "valid_from",
                            "valid_until", "created_at", "updated_at", "unknown", "why"])
        if field in ("valid_from", "valid_until", "created_at", "updated_at"):
            r[field] = _odd_time(rng)
        elif field == "id":
            r["id"] = rng.choice([None, "", "Upper", "a b", "ok-id.2_x", "x" * 129, "abc\n", 7,
                                  "naïve"])
        elif field in ("title", "description", "context", "why"):
            r[field] = rng.choice([None, "", "   ", "x" * 301, "a\x00b", "café ☕", "\ud800",
                                   "tab\tand\nnewline  spaced", 12, ["list"], "Ünïcödé ß"])
        elif field == "domain":
            r["domain"] = rng.choice([None, "", "  Infra  ", "two words", "a,b", "x" * 65, 3,
                                      "ÉCOLE", "\u00a0"])
        elif field in ("type", "severity", "origin"):
            r[field] = rng.choice([None, "", "rule", "warning", "user", "bogus", 1, "Rule"])
        elif field in ("tags", "applies_to"):
            r[field] = rng.choice([None, "", [], ["A", "a", " b ", ""], "x, y ,x", ["ok", 5],
                                   ["has space"], ["c++", "node.js"], ["x"] * 65,
                                   [f"t{i}" for i in range(64)], ["é", "É"], [["nested"]],
                                   ("tu", "ple"), {"a": 1}, ["ß", "SS"], ["a\x1fb"]])
        else:
            r["unknown"] = 1
    return r


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bulk_equals_one_by_one_on_mixed_batches(seed):
    rng = random.Random(seed)
    base = [dict(d) for d in generate(400, seed=seed).entries()]
    records = [_mutate(r, rng) if rng.random() < 0.3 else r for r in base]
    for size in (1, 7, 50, 400):
        for start in range(0, len(records), size):
            batch = records[start:start + size]
            _same(validate_many(batch), [_reference(r) for r in batch])


def _no_one_by_one(monkeypatch) -> None:
    """From here on a record validated one by one fails the test: the batch must take
    the bulk path."""
    def refuse(cls, data):
        raise AssertionError("validated one by one")
    monkeypatch.setattr(Entry, "from_dict", classmethod(refuse))


def test_valid_variants_take_the_fast_path_with_the_same_values(monkeypatch):
    """Valid but unusual values (numbers and offsets as times, tags and domains to
    fold) give the entries ``from_dict`` gives, without validating one by one."""
    rng = random.Random(9)
    records = []
    for i, r in enumerate(generate(300, seed=4).entries()):
        r = dict(r)
        r["created_at"] = rng.choice([r["created_at"], 1_700_000_000 + i, "1700000000.25",
                                      "2025-03-01T10:00:00+00:00", None])
        r["tags"] = [t.upper() for t in r.get("tags", [])] + [" extra "]
        r["applies_to"] = ["Py3", "py3", "Node"]
        r["domain"] = " " + r["domain"].upper() + " "
        records.append(r)
    want = [_reference(r) for r in records]
    assert all(isinstance(e, Entry) for e in want)
    _no_one_by_one(monkeypatch)
    _same(validate_many(records), want)


def test_the_bench_corpus_takes_the_fast_path(monkeypatch):
    records = list(generate(500, seed=2).entries())
    want = [_reference(r) for r in records]
    _no_one_by_one(monkeypatch)
    _same(validate_many(records), want)


def test_iso_timestamps_over_the_whole_range_parse_to_the_same_float():
    rng = random.Random(11)
    epoch = datetime(1, 1, 1, tzinfo=timezone.utc)
    span_us = int((datetime(9999, 12, 31, tzinfo=timezone.utc) - epoch).total_seconds() * 1e6)
    values = []
    for _ in range(3000):
        dt = epoch + timedelta(microseconds=rng.randrange(span_us))
        if rng.random() < 0.5:
            dt = dt.replace(microsecond=0)
        values.append(dt.isoformat(timespec="microseconds" if dt.microsecond else "seconds")
                      .replace("+00:00", "Z"))
    records = [{"id": f"e{i}", "title": "t", "description": "d", "updated_at": v}
               for i, v in enumerate(values)]
    got = validate_many(records)
    for v, e in zip(values, got):
        assert isinstance(e, Entry)
        want = parse_timestamp(v, "updated_at")
        assert e.updated_at == want and repr(e.updated_at) == repr(want), v


def test_jsonl_import_lines_are_the_entries_and_errors_of_the_old_path(tmp_path):
    """parse_lines (bulk) against json.loads + Entry.from_dict line by line: the same
    entries, links and error messages, bad lines anywhere in a group."""
    rng = random.Random(5)
    base = generate(2500, seed=5).entries()
    lines = []
    for i, r in enumerate(base):
        r = _mutate(r, rng) if rng.random() < 0.05 else dict(r)
        if i % 97 == 0:
            r["links"] = [{"target": "x", "type": "extends"}]
        if i % 401 == 0:
            r["links"] = [{"target": "x", "type": "nope"}]
        if i % 353 == 0:
            r["content_hash"] = "ignored"
        text = json.dumps(r)
        if i % 500 == 3:
            text = text[:-1]  # invalid JSON
        if i % 611 == 5:
            text = "[1, 2]"
        lines.append(text)
        if i % 250 == 0:
            lines.append("   ")
    parsed = list(parse_lines(lines))
    n_bad = 0
    number = 0
    expected = []
    for text in lines:
        number += 1
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            expected.append((number, None, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(record, dict):
            expected.append((number, None, "entry: expected a JSON object, got list"))
            continue
        links = record.pop("links", None)
        record.pop("content_hash", None)
        if links and links[0]["type"] == "nope":
            expected.append((number, None, "links[0].type: 'nope' is not one of supports, "
                             "contradicts, extends, sequences"))
            continue
        ref = _reference(record)
        expected.append((number, ref, None) if isinstance(ref, Entry) else (number, None, str(ref)))
    assert len(parsed) == len(expected)
    for p, (number, entry, error) in zip(parsed, expected):
        assert p.line == number
        if entry is None:
            n_bad += 1
            assert p.entry is None and p.error == error
        else:
            assert p.error is None and p.entry == entry
            assert p.entry.content_hash == entry.content_hash
    assert n_bad > 20


def test_the_bulk_insert_row_is_the_upsert_params_in_column_order():
    """store.capture_many writes new ids with entry_rows.insert_row (a positional INSERT)
    and changed ones with entry_params (the named UPSERT): a column added to or moved in
    ENTRY_COLUMNS must reach both alike."""
    from tiervault.vault.entry_rows import ENTRY_COLUMNS, entry_params, insert_row

    entries = [
        Entry.from_dict({"title": "bare", "description": "no times, no lists"}),
        Entry.from_dict({"id": "full", "title": "t", "description": "d", "type": "rule",
                         "domain": "db", "context": "c", "example": "e", "counter_example": "x",
                         "why": "w", "tags": ["a", "b"], "applies_to": ["src/x.py"],
                         "severity": "critical", "origin": "user",
                         "valid_from": "2024-01-01T00:00:00Z", "valid_until": "2025-01-01T00:00:00Z",
                         "created_at": "2024-02-01T00:00:00Z", "updated_at": "2024-03-01T00:00:00Z"}),
    ]
    for e in entries:
        params = entry_params(e, 7, 1234.5)
        row = insert_row(e, 7, 1234.5)
        # a missing validity bound is bound as NaN (SQLite stores it as NULL, like None)
        assert [math.isnan(v) for v in row[13:15]] == [e.valid_from is None, e.valid_until is None]
        assert row[:13] + row[15:] == tuple(params[c] for c in ENTRY_COLUMNS[:13] + ENTRY_COLUMNS[15:]) + (7,)
        assert [None if math.isnan(v) else v for v in row[13:15]] == [params["valid_from"],
                                                                     params["valid_until"]]
    assert ENTRY_COLUMNS[13:15] == ("valid_from", "valid_until")


def test_a_nan_bound_by_the_bulk_insert_is_stored_as_null(tmp_path):
    """What insert_row binds for a missing validity bound (NaN) is stored as NULL, the row a
    bound None makes: both columns read back None, typeof 'null', and the tier's queries
    on them (IS NULL) see the same rows."""
    import sqlite3

    from tiervault.vault.entry_rows import NULL_REAL

    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE TABLE t (k INTEGER, v REAL)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, None), (2, NULL_REAL), (3, 1.5)])
    assert conn.execute("SELECT k, v, typeof(v) FROM t ORDER BY k").fetchall() == [
        (1, None, "null"), (2, None, "null"), (3, 1.5, "real")]
    assert [k for (k,) in conn.execute("SELECT k FROM t WHERE v IS NULL ORDER BY k")] == [1, 2]


def test_entries_built_a_column_at_a_time_are_the_entries_init_builds():
    import dataclasses
    import pickle

    from tiervault.vault.entry import entries_from_columns

    assert not hasattr(Entry, "__post_init__")  # the column build skips __init__: nothing to miss
    built = [e for e in validate_many(list(generate(300, seed=5).entries()))]
    columns = [[getattr(e, f.name) for e in built] for f in dataclasses.fields(Entry)]
    by_init = list(map(Entry, *columns))
    by_column = entries_from_columns(*columns)
    assert by_column == by_init and len(by_column) == 300
    for a, b in zip(by_column, by_init):
        assert type(a) is Entry and repr(a) == repr(b) and hash(a) == hash(b)
        assert a.to_dict() == b.to_dict() and pickle.loads(pickle.dumps(a)) == b
        assert dataclasses.replace(a, title="changed").title == "changed"
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.title = "no"  # type: ignore[misc]
    assert entries_from_columns(*[[] for _ in columns]) == []
    with pytest.raises(ValueError):
        entries_from_columns(*columns[:-1])
    with pytest.raises(ValueError):
        entries_from_columns(*columns[:-1], columns[-1][:-1])


def _hash_records(rng: random.Random, odd: bool) -> list[dict]:
    """Valid records whose content folds in every way a hash can (``odd``): spaces at
    the ends of fields, runs of spaces, tabs and other whitespace str.split folds,
    non-ASCII letters and spaces, the batch's entry mark; else plain ASCII with upper
    case, empty fields, tags and applies_to unsorted."""
    texts = ["plain words", "Mixed CASE Words", "ok", "A-b_c.d (e) [f]", ""]
    items = ["b", "A", "c", "z", "Py3", "node", "Go"]
    if odd:
        texts += [" lead", "trail ", "two  spaces", "tab\there", "new\nline", "unit\x1fsep",
                  "nb\u00a0sp", "Straße", "ÉCOLE", "x\x01y", "a \x01 b"]
        items += ["é", "ß", "K"]
    out = []
    for i in range(300):
        out.append({"id": f"h{i}", "title": rng.choice(texts[:-1]) + "t",
                    "description": rng.choice(texts[:-1]) + "d",
                    "context": rng.choice(texts), "example": rng.choice(texts),
                    "why": rng.choice(texts), "domain": rng.choice(["db", "Infra"]),
                    "tags": rng.sample(items, rng.randint(0, 3)),
                    "applies_to": rng.sample(items, rng.randint(0, 2))})
    return out


def test_hashes_in_bulk_are_the_hashes_of_one_entry_at_a_time(monkeypatch):
    """The batch hash (one string per batch, ASCII text already folded) gives the
    hashes ``Entry.from_dict`` gives, and hands any text that needs folding to
    ``content_hashes``; plain batches never reach it."""
    import tiervault.vault.entry_bulk as bulk
    from tiervault.vault.entry import content_hashes

    calls = []

    def counted(rows):
        calls.append(1)
        return content_hashes(rows)

    monkeypatch.setattr(bulk, "content_hashes", counted)
    rng = random.Random(3)
    records = _hash_records(rng, odd=True)
    for size in (1, 3, 20, 300):
        for start in range(0, len(records), size):
            batch = records[start:start + size]
            _same(validate_many(batch), [_reference(r) for r in batch])
    assert calls  # odd text went the slow way
    calls.clear()
    plain = _hash_records(rng, odd=False)
    for size in (1, 7, 300):
        for start in range(0, len(plain), size):
            batch = plain[start:start + size]
            _same(validate_many(batch), [_reference(r) for r in batch])
    corpus = list(generate(400, seed=8).entries())
    _same(validate_many(corpus), [_reference(r) for r in corpus])
    assert not calls  # folded ASCII text: the batch hash only


def test_lines_decode_as_json_loads_decodes_them():
    """The scanner shortcut of the JSONL reader accepts exactly what json.loads accepts
    on a line, and every other line gets json.loads's error."""
    good = json.dumps({"id": "a1", "title": "t", "description": "d"})
    lines = [good, good + "\n", good + "\r\n", good + "  ", good + " \n", good + "\t",
             good + " x", good + good, " " + good, "\ufeff" + good, good[:-1], "{",
             "{}", '{"id": "n", "title": "t", "description": "d", "why": NaN}',
             '{"id": "d", "title": "t", "description": "d", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
             '{"id": "k", "title": "t", "description": "d", "id": "k2"}', "\n", "", "[1]",
             '{"id": "s", "title": "\\ud800", "description": "d"}']
    parsed = list(parse_lines(lines))
    expected = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            expected.append((number, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        except RecursionError:
            expected.append((number, "nested too deeply to be an entry"))
            continue
        if not isinstance(record, dict):
            expected.append((number, f"entry: expected a JSON object, got {type(record).__name__}"))
            continue
        ref = _reference(record)
        expected.append((number, ref if isinstance(ref, Entry) else str(ref)))
    assert [p.line for p in parsed] == [n for n, _ in expected]
    for p, (_, want) in zip(parsed, expected):
        if isinstance(want, Entry):
            assert p.error is None and p.entry == want
        else:
            assert p.entry is None and p.error == want, (p.line, p.error, want)
    assert sum(p.entry is not None for p in parsed) >= 6

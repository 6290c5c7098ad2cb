"""A SQLite tier's light rows (vault/store.py ``TierStore.light_rows``, vault/sqlite_sql.py
``light_rows_sql``): up to ``LIGHT_BOUND_IDS`` ids are bound one by one (``e.id IN (?,
...)``), more go through one JSON array (``json_each``), as every id did before (issue 16,
session 13: the JSON array's parse and subquery cost a scan's ~13-id statement more). Both
forms must answer the rows of the JSON statement of before, for any ids: missing ones,
repeated ones, rows whose timestamps the model refuses."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tiervault.vault.rows import LightRow
from tiervault.vault.sqlite_sql import LIGHT_BOUND_IDS, SANE_TIMES, SELECT_LIGHT, light_rows_sql

from brain_vault import filler, vault_at

#: the light-row statement before session 13: every id through json_each
BEFORE = (f"SELECT {SELECT_LIGHT} FROM entries e "
          f"WHERE e.id IN (SELECT value FROM json_each(?)) AND {SANE_TIMES}")


@pytest.fixture
def store(tmp_path: Path):
    for manager in vault_at(tmp_path, "agent"):
        manager.capture_many(filler(130), tier="agent")
        # timestamps the model refuses, written by outside SQL: no light row in either form
        with sqlite3.connect(tmp_path / "agent.db") as con:
            con.execute("UPDATE entries SET created_at = 1e300 WHERE id = 'fill-7'")
            con.execute("UPDATE entries SET valid_until = -1e300 WHERE id = 'fill-9'")
        yield manager.store("agent")


def _before(store, ids: list[str], chars: int = 120) -> dict[str, LightRow]:
    rows = store.db.query(BEFORE, (chars, json.dumps(ids)))
    return {row[0]: LightRow._make(row) for row in rows}


@pytest.mark.parametrize("n", [1, 2, 13, LIGHT_BOUND_IDS - 1, LIGHT_BOUND_IDS,
                               LIGHT_BOUND_IDS + 1, 140])
def test_bound_and_json_forms_answer_the_rows_of_before(store, n):
    # held ids, the two refused rows, ids no entry has, one id twice
    ids = [f"fill-{(i * 7) % 133}" if i % 5 else f"nope-{i}" for i in range(n)]
    if n > 2:
        ids[1:3] = ["fill-7", "fill-9"]
        ids[-1] = ids[0]
    got = store.light_rows(ids, snippet_chars=17)
    assert got == _before(store, ids, 17)
    assert "fill-7" not in got and "fill-9" not in got
    assert all(len(r.snippet) <= 17 for r in got.values())
    # with the texts (issue 16 session 18): the same rows, and each row's FieldTexts as
    # the tier's own field_texts reads them (term proximity's read of before)
    texts: dict = {"kept": "before"}
    assert store.light_rows_texts(ids, texts, snippet_chars=17) == got
    assert texts.pop("kept") == "before" and texts == {
        eid: row for eid, row in store.field_texts(ids).items() if eid in got}


def test_a_statement_binds_each_id_up_to_the_bound_then_one_json_array(store):
    seen: list[str] = []
    store.db.reader().set_trace_callback(seen.append)
    ids = [f"fill-{i}" for i in range(LIGHT_BOUND_IDS + 1)]
    store.light_rows(ids[:3])
    store.light_rows(ids[:LIGHT_BOUND_IDS])
    store.light_rows(ids)
    light = [s for s in seen if "substr(e.description" in s]
    assert len(light) == 3
    assert "json_each" not in light[0] and "'fill-2'" in light[0]  # bound ids, expanded by trace
    assert "json_each" not in light[1] and f"'fill-{LIGHT_BOUND_IDS - 1}'" in light[1]
    assert "json_each" in light[2]
    # one text per size (the driver's statement cache is keyed by it), at most the bound's
    assert light_rows_sql(3) is light_rows_sql(3)
    assert light_rows_sql(LIGHT_BOUND_IDS + 1) is light_rows_sql(10 * LIGHT_BOUND_IDS)
    assert len({light_rows_sql(n) for n in range(1, 4 * LIGHT_BOUND_IDS)}) == LIGHT_BOUND_IDS + 1


def test_no_ids_no_statement(store):
    seen: list[str] = []
    store.db.reader().set_trace_callback(seen.append)
    assert store.light_rows([]) == {}
    assert seen == []

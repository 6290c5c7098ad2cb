"""The read-only SQL surface: views of every tier, search calls, and refusal of
everything that is not a read (the tier files stay byte-identical)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiervault.brain import Brain
from tiervault.brain.sql_calls import find_table_calls, lex, one_statement
from tiervault.brain.sql_surface import SqlSurface
from tiervault.errors import QueryError
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager


@pytest.fixture()
def surface(tmp_path: Path):
    manager = VaultManager.at({"agent": str(tmp_path / "a.db"), "team": str(tmp_path / "t.db")})
    manager.capture(Entry.create(id="sql-params", title="Parameterise SQL queries",
                                 description="Never build SQL by string formatting; bind values.",
                                 type="rule", domain="security", severity="critical",
                                 tags=["sql", "security"]), tier="team")
    manager.capture(Entry.create(id="orm-usage", title="Prefer the ORM query builder",
                                 description="The ORM binds parameters for you.",
                                 domain="security", tags=["sql"]), tier="team")
    manager.capture(Entry.create(id="my-note", title="Local note on sql timeouts",
                                 description="Set statement_timeout on long reports.",
                                 domain="databases"), tier="agent")
    manager.link("orm-usage", "sql-params", "supports", note="same goal", tier="team")
    brain = Brain(manager)
    brain.feedback("sql injection", "sql-params", "accepted")
    s = SqlSurface(brain, row_limit=5, time_limit=1.0)
    yield s, tmp_path
    s.close()
    brain.close()


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.glob("*.db*"))}


def test_views_join_across_tiers(surface):
    s, _ = surface
    r = s.run("SELECT tier, id, severity FROM entries ORDER BY id")
    assert r.columns == ["tier", "id", "severity"]
    assert r.rows == [("agent", "my-note", "suggestion"), ("team", "orm-usage", "suggestion"),
                      ("team", "sql-params", "critical")]
    r = s.run("SELECT e.title, l.link_type, l.note FROM links l "
              "JOIN entries e ON e.id = l.target_id")
    assert r.rows == [("Parameterise SQL queries", "supports", "same goal")]
    r = s.run("SELECT tier, entry_id, action FROM feedback")
    assert r.rows == [("agent", "sql-params", "accepted")]


def test_search_calls_several_per_statement_and_temp_state_cleaned(surface):
    s, _ = surface
    r = s.run("SELECT k.id, k.rank FROM keyword('sql queries', 10) k "
              "JOIN vec_search('sql injection') v ON v.id = k.id ORDER BY k.rank")
    assert r.rows and r.rows[0][0] == "sql-params"
    # The generated tables are gone after the statement.
    assert s.run("SELECT count(*) FROM temp.sqlite_master").rows == [(0,)]
    # A call spelled inside a string or a comment is not a call.
    r = s.run("SELECT 'keyword(''x'')' AS t -- vec_search('y')\n")
    assert r.rows == [("keyword('x')",)]


def test_row_limit_is_reported(surface):
    s, _ = surface
    r = s.run("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) "
              "SELECT i FROM n")
    assert len(r.rows) == 5 and r.truncated


def test_time_limit_stops_a_runaway_statement(surface):
    s, _ = surface
    with pytest.raises(QueryError, match="ran past 1 s"):
        s.run("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
              "SELECT count(*) FROM n")


@pytest.mark.parametrize("sql", [
    "INSERT INTO entries(id) VALUES ('x')",
    "UPDATE entries SET title = 'x'",
    "DELETE FROM entries",
    "DROP TABLE entries",
    "CREATE TABLE t(x)",
    "CREATE TEMP TABLE t(x)",
    "ATTACH DATABASE '/tmp/tv-attack.db' AS x",
    "PRAGMA writable_schema = ON",
    "SELECT load_extension('/tmp/evil.so')",
    "SELECT readfile('/etc/passwd')",
    "VACUUM INTO '/tmp/tv-attack-copy.db'",
    "REPLACE INTO links VALUES (1,2,3,4,5,6)",
    "SELECT 1; DELETE FROM entries",
    "BEGIN",
    "SAVEPOINT x",
])
def test_everything_but_reading_is_refused_and_tiers_are_untouched(surface, sql):
    s, folder = surface
    s.run("SELECT count(*) FROM entries")
    before = _digest(folder)
    with pytest.raises(QueryError):
        s.run(sql)
    assert _digest(folder) == before
    assert not Path("/tmp/tv-attack.db").exists() and not Path("/tmp/tv-attack-copy.db").exists()
    assert s.run("SELECT count(*) FROM entries").rows == [(3,)]


@pytest.mark.parametrize("sql, fragment", [
    ("SELECT * FROM keyword(title)", "must be literals"),
    ("SELECT * FROM keyword('x', 0)", "k from 1 to"),
    ("SELECT * FROM vec_search('x', 'bogus:1')", "unknown token"),
    ("SELECT * FROM keyword('x'", "not closed"),
    ("", "give a SELECT"),
    ("SELECT * FROM nowhere", "no such table"),
])
def test_bad_statements_are_clear_errors(surface, sql, fragment):
    s, _ = surface
    with pytest.raises(QueryError) as err:
        s.run(sql)
    assert fragment in str(err.value)


def test_schema_describes_what_is_there(surface):
    s, _ = surface
    schema = s.schema()
    assert schema["tables"]["entries"]["rows"] == 3
    assert "severity" in schema["tables"]["entries"]["columns"]
    assert set(schema["calls"]) == {"keyword", "vec_search"}


def test_snapshot_follows_writes(surface):
    s, _ = surface
    assert s.run("SELECT count(*) FROM entries").rows == [(3,)]
    s.brain.manager.capture(Entry.create(id="new-one", title="New", description="d"), tier="agent")
    assert s.run("SELECT count(*) FROM entries").rows == [(4,)]


def test_lexer_keeps_literals_and_calls_apart():
    sql = "SELECT \"keyword\", [vec_search] FROM keyword('it''s', -3) /* keyword('no') */"
    calls = find_table_calls(sql, ["keyword", "vec_search"])
    assert [(c.name, c.args) for c in calls] == [("keyword", ("it's", -3))]
    assert one_statement("SELECT 1 ; -- done") == "SELECT 1 "
    with pytest.raises(QueryError, match="unterminated string"):
        lex("SELECT 'open")
    with pytest.raises(QueryError, match="'0x10' is not a number; write it in decimal"):
        lex("SELECT * FROM keyword('x', 0x10)")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_any_string_literal_round_trips_as_a_call_argument(text):
    literal = "'" + text.replace("'", "''") + "'"
    calls = find_table_calls(f"SELECT * FROM keyword({literal}, 7) k", ["keyword"])
    assert [c.args for c in calls] == [(text, 7)]


def test_cli_sql_schema_and_refusals(tmp_path):
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "agent.yaml").write_text("tiers:\n  agent: a.db\n  team: t.db\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    assert cli("capture", "--title", "Parameterise SQL", "--description", "bind values",
               "--tier", "team", "--severity", "critical").returncode == 0
    r = cli("sql", "SELECT tier, id, severity FROM entries", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"columns": ["tier", "id", "severity"],
                                    "rows": [["team", "parameterise-sql", "critical"]],
                                    "truncated": False}
    r = cli("sql", "--schema")
    assert r.returncode == 0 and "vec_search(" in r.stdout and "entries (1 rows)" in r.stdout
    before = (tmp_path / "t.db").read_bytes()
    r = cli("sql", "DROP TABLE entries", "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["error"] == "invalid"
    assert "Traceback" not in r.stderr and "not authorized" in r.stderr
    assert (tmp_path / "t.db").read_bytes() == before
    r = cli("search", "sql", "--modulate", "decay:30", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["id"] == "parameterise-sql"
    r = cli("search", "sql", "--modulate", "decay:soon")
    assert r.returncode == 2 and "'decay:soon'" in r.stderr and "Traceback" not in r.stderr

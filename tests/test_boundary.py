"""The storage boundary holds: checked on the source tree by parsing it (ast, not regex).

1. ``sqlite3`` is imported only by the SQLite backend modules (and the tokenizer,
   which runs FTS5's own tokenizer in an in-memory database to define terms).
2. No module reads or writes another module's private members: ``x._name``
   where ``x`` is not ``self``/``cls`` is allowed only when ``_name`` is defined
   in the same module AND ``x`` is a plain local name (an instance of the
   module's own class); a chain such as ``self.store._query`` or an attribute
   the module does not define (``store._conn`` in vectors.py) is a violation,
   and so is ``from m import _name``.
3. No module sets attributes on tiervault objects another module owns (a
   receiver spelled manager/store/backend/tier/brain/...; ``manager.embeddings =
   ...`` from embeddings/runtime.py was one) unless it defines that attribute.
4. Upper layers (brain, embeddings, CLI, MCP, server) import no SQLite backend
   module and call no SQLite-only method (``postings()``, ``search_fts``,
   ``snapshot``, ``db``): they see a :class:`TierBackend`.
5. Store rows are read by field name in the Brain: no ``LIGHT`` position table,
   no integer subscripts on light rows.
6. Rows that come from another module as plain tuples (``get_many``'s (entry, tier),
   ``search_memories``' (memory, tier), a vector source's (id, tier, cosine), a
   ``MemorySignals.hits`` row) are unpacked by name in the upper layers, never indexed by
   number (``found[i][1]``, ``h[0]``).

Each checker is also run on a planted violation, so the test cannot pass by
finding nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("tiervault", "vault", "brain", "embeddings", "config")
# The project's tools and tests keep rule 2 too (a bench script or test that reaches into a
# module's privates breaks when that module is reworked, and hides a missing public API).
TOOL_DIRS = ("bench", "eval", "tests")
UPPER_DIRS = ("tiervault", "brain", "embeddings", "config")

SQLITE_BACKEND = {"vault/store.py", "vault/journal.py", "vault/vectors.py", "vault/connection.py",
                  "vault/schema.py", "vault/sqlite_db.py", "vault/sqlite_sql.py",
                  "vault/sqlite_errors.py", "vault/maintenance.py", "vault/sqlite_links.py",
                  "vault/sqlite_epochs.py", "vault/sqlite_listing.py", "vault/sqlite_bulk.py"}
# The tokenizer asks FTS5 itself (in-memory, no tier file) what a term is.
# The SQL surface runs agents' read-only SELECTs on a private in-memory copy it fills
# through the tier contract (no tier file is ever opened there).
SQLITE_ALLOWED = SQLITE_BACKEND | {"vault/tokenizer.py", "brain/sql_surface.py"}
# NamedTuple's public API is spelled with a leading underscore (to avoid field clashes).
NAMEDTUPLE_API = {"_make", "_fields", "_replace", "_asdict", "_field_defaults"}
# Standard-library functions whose public name starts with an underscore.
STDLIB_PUBLIC = {"os._exit"}
# Receivers that are tiervault objects owned by other modules (VaultManager, backends,
# tiers, the Brain, runtimes): the upper layers must not set attributes on them.
FOREIGN_RECEIVERS = ("manager", "store", "backend", "brain", "vault", "tier", "runtime", "recall",
                     "pipeline", "settings", "catalog")
SQLITE_ONLY_MEMBERS = {"postings", "search_fts", "snapshot", "db", "file_size", "journal", "lexicon"}


def source_files(dirs: tuple[str, ...] = SOURCE_DIRS) -> list[Path]:
    files = []
    for d in dirs:
        files.extend(p for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)
    assert len(files) > 40, "the source tree was not found"
    return sorted(files)


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- checkers (each returns violations as "file:line: what") -----------------------------------
def sqlite_imports(tree: ast.AST, name: str) -> list[str]:
    out = []
    for node in ast.walk(tree):
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module]
        if any(m == "sqlite3" or m.startswith("sqlite3.") for m in mods) and name not in SQLITE_ALLOWED:
            out.append(f"{name}:{node.lineno}: imports sqlite3 outside the SQLite backend")
    return out


def _defined_members(tree: ast.AST) -> set[str]:
    """Names a module defines as members: def/class names, class-level fields,
    ``self.x = ...`` / ``cls.x = ...`` targets and __slots__ strings."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                    if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets):
                        names.update(c.value for c in ast.walk(item.value)
                                     if isinstance(c, ast.Constant) and isinstance(c.value, str))
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                            and sub.value.id in ("self", "cls")):
                        names.add(sub.attr)
    return names


def private_access(tree: ast.AST, name: str) -> list[str]:
    own = _defined_members(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{name}:{node.lineno}: imports private {alias.name} from {node.module}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "__dict__"
                and not (isinstance(node.func.value.value, ast.Name)
                         and node.func.value.value.id in ("self", "cls"))
                and node.args and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("_")):
            # obj.__dict__.setdefault("_x", ...): the same reach, spelled around the check
            out.append(f"{name}:{node.lineno}: {ast.unparse(node.func.value)}[{node.args[0].value!r}] "
                       "reaches a private member of another object")
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or attr.startswith("__") or attr in NAMEDTUPLE_API:
            continue
        receiver = node.value
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
            continue
        if isinstance(receiver, ast.Name) and attr in own:
            continue  # an instance of this module's own class (e.g. in a classmethod)
        if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super":
            continue
        shown = ast.unparse(node)
        if shown in STDLIB_PUBLIC:
            continue
        out.append(f"{name}:{node.lineno}: {shown} reaches a private member of another object")
    return out


def foreign_attribute_writes(tree: ast.AST, name: str) -> list[str]:
    own = _defined_members(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if not isinstance(sub, ast.Attribute) or not isinstance(sub.ctx, ast.Store):
                    continue
                if isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"):
                    continue
                if sub.attr in own:
                    continue  # a field of a class this module defines
                receiver = ast.unparse(sub.value).lower()
                if not any(word in receiver for word in FOREIGN_RECEIVERS):
                    continue  # a third-party object configured through its public attributes
                out.append(f"{name}:{node.lineno}: sets {ast.unparse(sub)} on another module's object")
    return out


def sqlite_reach(tree: ast.AST, name: str) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in mods:
                short = m.replace("tiervault.", "").replace(".", "/") + ".py"
                if short in SQLITE_BACKEND:
                    out.append(f"{name}:{node.lineno}: imports the SQLite backend module {m}")
        if isinstance(node, ast.Attribute) and node.attr in SQLITE_ONLY_MEMBERS:
            recv = ast.unparse(node.value)
            if "store" in recv or "tier" in recv:
                out.append(f"{name}:{node.lineno}: {ast.unparse(node)} is SQLite-only, not the contract")
    return out


# Calls whose answer is a container of tuples made in another module, and attributes that hold one.
TUPLE_ROW_CALLS = {"get_many", "search_memories", "search"}
TUPLE_ROW_ATTRS = {"hits"}


def _tuple_rows_source(node: ast.AST, containers: set[str]) -> bool:
    """Whether iterating ``node`` yields tuple rows from another module."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in TUPLE_ROW_CALLS
    if isinstance(node, ast.Attribute):
        return node.attr in TUPLE_ROW_ATTRS
    return isinstance(node, ast.Name) and node.id in containers


def tuple_fields_by_position(tree: ast.AST, name: str) -> list[str]:
    containers: set[str] = set()  # names bound to such a container (hits = store.search(...))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.IfExp):
                value = value.body
            if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
                value = value.generators[0].iter
            if _tuple_rows_source(value, set()):
                containers.add(node.targets[0].id)
    rows: set[str] = set()  # loop / comprehension names bound to one row
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, (ast.For, ast.comprehension)):
            pairs.append((node.target, node.iter))
        for target, source in pairs:
            if isinstance(target, ast.Name) and _tuple_rows_source(source, containers):
                rows.add(target.id)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int)):
            continue
        value = node.value
        by_row = isinstance(value, ast.Name) and value.id in rows
        by_key = (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
                  and value.value.id in containers)
        if by_row or by_key:
            out.append(f"{name}:{node.lineno}: {ast.unparse(node)} reads a row from another module by position")
    return out


def positional_rows(tree: ast.AST, name: str) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ("LIGHT", "LIGHT_COLUMNS"):
            out.append(f"{name}:{node.lineno}: a position table of store rows ({node.id})")
        if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int) and isinstance(node.value, ast.Name)
                and node.value.id in ("row", "light", "stored")):
            out.append(f"{name}:{node.lineno}: {ast.unparse(node)} indexes a store row by position")
    return out


# Known places that still reach past the contract, each with why. The test fails
# when a new one appears AND when one of these is fixed (so the list stays true).
KNOWN_REACH = {
    # The CLI walks argparse's parsers to list every sub-command and option (stdlib
    # internals, not another tiervault module's).
    "tiervault/cli/__init__.py": ("parser._actions", "argparse._SubParsersAction",
                                  "child._option_string_actions"),
}


# The same for bench/, eval/ and tests/.
KNOWN_TOOL_REACH = {
    # A/B instrumentation run against older checkouts too: it wraps the private write step
    # of PgTierStore (which both sides have) to time the write thread.
    "bench/pg_import_ab.py": ("store._write_batch",),
    # A profile of the hybrid scan's vector leg (issue 16 session 14, bench/README.md): it
    # times the masking step of a compressed scan, which has no public name.
    "bench/hybrid_cold_parts.py": ("vector_base._excluded",),
    # Micro-timings and a reference check of string_table's pure-Python fingerprint path;
    # vault/string_table.py is reworked by the scan engineer this session (a public name
    # for it is theirs to give).
    "bench/scan_micro.py": ("st._py_fingerprint", "st._encode", "st._PY_CHARS"),
    "tests/test_mirror_cache_file.py": ("private _py_fingerprint",),
    # Probes of issue 16 session 13 (bench/README.md): a query vector computed afresh each
    # call (the two memos reset), and light rows by the rowids the string table's memo knows
    # (a design measured and dropped: no public name was given to what it would need).
    "bench/latent_v_rows_ab.py": ("m._query_memo", "p._query_weights"),
    "bench/light_rows_rowid_ab.py": ("p.ids.base._memo",),
    # Counts the table's private look-up to prove a search makes none (used by
    # test_string_memo and test_slot_map).
    "tests/lookup_spy.py": ("StringTable._find",),
    # A probe of issue 16 session 15 (bench/README.md): reading + analysis of a tier's rows,
    # whole or a chunk at a time, each chunk registered as a first build does (no public name).
    "bench/s15_stream_rows.py": ("p._register", "p._append_columns"),
    # Probes of issue 16 session 16 (bench/README.md, the first mirror build at 1M): they time
    # private steps of the row analysis (a block's sums, the byte split's steps, the FTS5
    # stemming of new words), which have no public name, against the same data.
    "bench/s16_sums_ab.py": ("ma._sums", "old._sums", "ma._learn"),
    "bench/s16_split_steps.py": ("wc._KEEP", "wc._TABLE", "wc._BIG_U8", "wc._joined"),
    "bench/s16_fts5_words.py": ("STEMMER._fts5", "STEMMER._cache"),
    # A probe of issue 16 session 20 (bench/README.md, the lexical fixed costs): it times each
    # tier's top k (the lexicon's private pick, which has no public name) by kind of query.
    "bench/s20_lex_kinds.py": ("lexicon.MirrorLexicon._pick",),
    # Runs the worker's own command line (vault/mirror_workers.py) in a subprocess.
    "tests/test_mirror_workers.py": ("mirror_workers._WORKER_CODE",),
    # White-box checks of embeddings/slot_map.py's maps as recall keeps them per tier.
    "tests/test_recall.py": ("recall._state",),
    "tests/test_slot_map.py": ("recall._state",),
    # Asserts that Secret's private field cannot be written.
    "tests/test_config.py": ("s._value",),
    # Walks argparse's parsers (stdlib internals) for every sub-command's options.
    "tests/test_security.py": ("parser._actions", "p._actions", "argparse._SubParsersAction"),
}


def _known(violation: str) -> bool:
    name = violation.split(":", 1)[0]
    return any(part in violation for part in KNOWN_REACH.get(name, ()) + KNOWN_TOOL_REACH.get(name, ()))


def _scan(checker, dirs=SOURCE_DIRS) -> list[str]:
    out = []
    for path in source_files(tuple(dict.fromkeys(SOURCE_DIRS + tuple(dirs)))):
        name = rel(path)
        if name.split("/")[0] in dirs:
            out.extend(checker(ast.parse(path.read_text(encoding="utf-8")), name))
    return out


# -- the tree ----------------------------------------------------------------------------------
def test_sqlite3_is_imported_only_by_the_sqlite_backend():
    assert [v for v in _scan(sqlite_imports) if not _known(v)] == []


def test_no_private_member_access_across_modules():
    assert [v for v in _scan(private_access) if not _known(v)] == []


def test_no_private_member_access_in_bench_eval_and_tests():
    assert [v for v in _scan(private_access, TOOL_DIRS) if not _known(v)] == []


def test_every_known_tool_exception_is_still_real():
    found = _scan(private_access, TOOL_DIRS)
    for name, parts in KNOWN_TOOL_REACH.items():  # a fixed exception must leave the list
        for part in parts:
            assert any(v.startswith(name + ":") and part in v for v in found), (name, part)


def test_upper_layers_set_no_attributes_on_other_modules_objects():
    assert _scan(foreign_attribute_writes, UPPER_DIRS + ("vault",)) == []


def test_upper_layers_use_only_the_contract():
    assert [v for v in _scan(sqlite_reach, UPPER_DIRS) if not _known(v)] == []


def test_every_known_exception_is_still_real():
    found = (_scan(sqlite_reach, UPPER_DIRS) + _scan(sqlite_imports) + _scan(private_access)
             + _scan(tuple_fields_by_position, UPPER_DIRS))
    for name, parts in KNOWN_REACH.items():  # a fixed exception must leave the list
        for part in parts:
            assert any(v.startswith(name + ":") and part in v for v in found), (name, part)


def test_upper_layers_read_other_modules_tuple_rows_by_name():
    assert [v for v in _scan(tuple_fields_by_position, UPPER_DIRS) if not _known(v)] == []


def test_brain_reads_store_rows_by_name():
    assert _scan(positional_rows, ("brain",)) == []


def test_the_sqlite_backend_modules_exist():
    # The allow-lists name real files (a renamed module would silently widen them).
    for name in SQLITE_BACKEND | SQLITE_ALLOWED:
        assert (ROOT / name).exists(), name


# -- the checkers find what they look for ------------------------------------------------------
PLANTED = '''
import sqlite3
from tiervault.vault.store import _SELECT
from tiervault.vault.sqlite_db import SqliteDb

class Recall:
    def __init__(self, store):
        self._own = 1
        self.store = store

    def bad(self, other, manager, row):
        other._own                      # allowed: _own is this module's member, plain name
        self.store._query("x")          # chain into another object
        other._conn.execute("y")        # _conn is not defined here
        self.store.__dict__.setdefault("_cache", set())  # the same, through __dict__
        manager.embeddings = self       # sets an attribute on another module's object
        self.store.postings()           # SQLite-only
        found = manager.get_many(["a"])
        hits = manager.search_memories("q", 5)
        firsts = [h[0] for h in hits]           # a memory row by position
        entry, tier = found["a"]                # allowed: unpacked
        return row[3], LIGHT["id"], found["a"][1], [m for m, t in hits], self.ms.hits[0]
'''


@pytest.mark.parametrize("checker, expected", [
    (sqlite_imports, ["imports sqlite3"]),
    (private_access, ["private _SELECT", "self.store._query", "other._conn", "__dict__['_cache']"]),
    (foreign_attribute_writes, ["manager.embeddings"]),
    (sqlite_reach, ["tiervault.vault.sqlite_db", "self.store.postings"]),
    (positional_rows, ["row[3]", "LIGHT"]),
    (tuple_fields_by_position, ["h[0]", "found['a'][1]"]),
])
def test_each_checker_catches_a_planted_violation(checker, expected):
    found = checker(ast.parse(PLANTED), "brain/planted.py")
    for needle in expected:
        assert any(needle in f for f in found), (needle, found)
    assert not any("other._own" in f for f in found)

"""Markdown folders: exact round trips, change-only re-import, --prune, bad files by name.

The folder tests run the real CLI (`export-md` / `import-md`) in a subprocess
against real tier files in tmp_path; the format tests call render/parse directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiervault.vault.entry import Entry
from tiervault.vault.jsonl import LinkSpec, parse_record
from tiervault.vault.markdown import parse, render

PACK = Path(__file__).resolve().parents[1] / "vault" / "packs" / "starter.jsonl"


def pack_records() -> list[dict]:
    return [json.loads(line) for line in PACK.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- the file format -----------------------------------------------------------------------------
def test_every_starter_entry_round_trips_through_one_file():
    for record in pack_records():
        entry, links = parse_record(record)
        text = render(entry, links)
        back = parse(text, f"{entry.id}.md")
        assert back.error is None, back.error
        assert back.entry == entry
        assert sorted(back.links, key=lambda l: l.target) == sorted(links, key=lambda l: l.target)
        assert render(back.entry, back.links) == text


def test_file_layout_is_front_matter_then_title_and_sections():
    entry = Entry.create(id="r1", title="Pin dependencies", description="Lock versions.",
                         context="Apps, not libraries.", why="Reproducible builds.",
                         tags=["deps", "ci"], severity="warning", origin="user",
                         valid_until="2030-01-01T00:00:00Z")
    text = render(entry, [LinkSpec("r2", "supports", "same goal")])
    front, body = text.split("\n---\n", 1)
    assert front.startswith("---\nid: r1\n")
    assert "tags: [deps, ci]" in front and "valid_until: '2030-01-01T00:00:00Z'" in front
    assert "- target: r2\n  type: supports\n  note: same goal" in front
    assert body == ("\n# Pin dependencies\n\nLock versions.\n\n## Context\n\nApps, not libraries."
                    "\n\n## Why\n\nReproducible builds.\n")
    assert "## Example" not in body  # empty sections are left out


def test_hand_written_file_defaults_and_lenient_layout():
    text = ("---\ntype: anti-pattern\nvalid_from: 2025-01-31\n---\n\n\n#   Spaced title  \n"
            "First paragraph.\n\nSecond paragraph.\n\n\n## why   \n\n  Because.\n\n")
    got = parse(text, "my-rule.md")
    assert got.error is None, got.error
    e = got.entry
    assert (e.id, e.title, e.origin, e.type) == ("my-rule", "Spaced title", "user", "anti-pattern")
    assert e.description == "First paragraph.\n\nSecond paragraph."
    assert e.why == "  Because."
    assert e.to_dict()["valid_from"] == "2025-01-31T00:00:00Z"


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"),
                max_size=60)
_tricky = st.sampled_from(["", "\n", "\r\n", "  ", "## Context", "## why", "# x", "---", "\n\n",
                           "\t", "|", "'", '"', ": ", "- a", "\u2028", "\x85", "null", "yes"])
_field = st.lists(st.one_of(_text, _tricky), max_size=6).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(title=_field.filter(lambda s: s.strip() != ""), description=_field.filter(lambda s: s.strip() != ""),
       context=_field, example=_field, counter=_field, why=_field)
def test_any_text_round_trips_exactly(title, description, context, example, counter, why):
    entry = Entry.create(id="x", title=title[:300], description=description, context=context,
                         example=example, counter_example=counter, why=why)
    text = render(entry)
    back = parse(text, "x.md")
    assert back.error is None, (back.error, text)
    assert back.entry == entry
    assert render(back.entry) == text


# -- bad files ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, where, words", [
    ("---\nid: a\ntags: [x\n---\n# T\n\nd\n", ":4:", ["YAML"]),
    ("---\nid: a\nseverity: high\n---\n# T\n\nd\n", ":3:", ["severity", "critical"]),
    ("---\nid: a\ncolour: red\n---\n# T\n\nd\n", ":3:", ["colour", "allowed fields"]),
    ("---\nid: a\n---\n\nno title here\n", ":5:", ["# Title"]),
    ("no title, no front matter\n", ":1:", ["# Title"]),
    ("---\nid: a\n# T\n", ":1:", ["not closed"]),
    ("---\nid: a\n---\n# T\n\nd\n## Why\nx\n## Why\ny\n", ":9:", ["second"]),
    ("---\nid: Bad Id\n---\n# T\n\nd\n", ":2:", ["id", "lowercase"]),
    ("---\n- a\n- b\n---\n# T\n\nd\n", ":2:", ["mapping"]),
    ("---\nid: a\ntype: rule\nid: b\n---\n# T\n\nd\n", ":4:", ["id", "twice", "lines 2 and 4"]),
])
def test_bad_file_errors_name_file_line_and_problem(text, where, words):
    got = parse(text, "dir/bad.md")
    assert got.entry is None
    assert got.error.startswith("dir/bad.md" + where), got.error
    for word in words:
        assert word in got.error
    assert "Traceback" not in got.error


# -- folders through the CLI ----------------------------------------------------------------------
def cli(args: list[str], cwd: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(cwd / "home")
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def make_vault(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "home").mkdir()
    (root / "agent.yaml").write_text("tiers:\n  agent: a.db\n  project: p.db\n  team: t.db\n")
    return root


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The starter pack imported into a team tier and exported as Markdown."""
    root = make_vault(tmp_path_factory.mktemp("md") / "v1")
    r = cli(["import", str(PACK), "--tier", "team"], root)
    assert r.returncode == 0, r.stderr
    r = cli(["export-md", "md", "--tier", "team", "--json"], root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["written"] == 210
    return root


def stored(root: Path, entry_id: str) -> dict | None:
    """The entry as the vault under ``root`` holds it (read in-process), or None."""
    from tiervault.errors import EntryNotFound
    from tiervault.vault.manager import VaultManager

    with VaultManager.at({"agent": str(root / "a.db"), "project": str(root / "p.db"),
                          "team": str(root / "t.db")}) as manager:
        try:
            return manager.get(entry_id)[0].to_dict()
        except EntryNotFound:
            return None


def tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.md"))}


def test_folder_round_trip_is_exact_and_matches_jsonl(exported, tmp_path):
    first = tree(exported / "md")
    assert len(first) == 210
    other = make_vault(tmp_path / "v2")
    r = cli(["import-md", str(exported / "md"), "--tier", "team", "--json"], other)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert (report["added"], report["updated"], report["unchanged"]) == (210, 0, 0)
    r = cli(["export-md", "md", "--tier", "team"], other)
    assert r.returncode == 0, r.stderr
    assert tree(other / "md") == first
    jsonl = [sorted(cli(["export", "--tier", "team"], root).stdout.splitlines())
             for root in (exported, other)]
    assert jsonl[0] == jsonl[1] and len(jsonl[0]) == 210
    # Exporting again rewrites nothing; importing the same folder again changes nothing.
    r = cli(["export-md", "md", "--tier", "team", "--json"], other)
    assert json.loads(r.stdout)["written"] == 0
    r = cli(["import-md", "md", "--tier", "team", "--json"], other)
    report = json.loads(r.stdout)
    assert (report["added"], report["updated"], report["unchanged"]) == (0, 0, 210)


def test_reimport_of_edited_folder_updates_only_what_changed(exported, tmp_path):
    root = make_vault(tmp_path / "v")
    md = tmp_path / "folder"
    md.mkdir()
    for name, data in tree(exported / "md").items():
        (md / name).write_bytes(data)
    assert cli(["import-md", str(md), "--tier", "team"], root).returncode == 0
    before = stored(root, "rel-timeouts-on-every-call")

    edited = md / "rel-timeouts-on-every-call.md"
    edited.write_text(edited.read_text().replace("## Why\n\n", "## Why\n\nEdited in review. "))
    relinked = md / "sec-parameterized-queries.md"
    relinked.write_text(relinked.read_text().replace("type: supports", "type: extends"))
    (md / "new-rule.md").write_text("---\ntags: [review]\nseverity: warning\n---\n"
                                    "# Review every migration\n\nTwo people read each migration.\n")
    (md / "sub").mkdir()
    (md / "perf-reuse-http-clients.md").rename(md / "sub" / "perf-reuse-http-clients.md")
    (md / "obs-structured-logs.md").unlink(missing_ok=True)
    removed = sorted(set(tree(exported / "md")) - set(tree(md)) - {"perf-reuse-http-clients.md"})
    assert removed, "the fixture should have deleted one file"

    r = cli(["import-md", str(md), "--tier", "team", "--json"], root)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["addedIds"] == ["new-rule"]
    assert sorted(report["updatedIds"]) == ["rel-timeouts-on-every-call", "sec-parameterized-queries"]
    assert report["unchanged"] == 210 - 2 - len(removed)
    assert report["pruned"] == 0
    for gone in removed:  # no --prune: nothing is deleted
        assert stored(root, gone[:-3]) is not None

    after = stored(root, "rel-timeouts-on-every-call")
    assert after["why"].startswith("Edited in review. ")
    assert after["created_at"] == before["created_at"]
    assert after["updated_at"] != before["updated_at"]  # an edited entry is fresh again
    new = stored(root, "new-rule")
    assert (new["origin"], new["tags"], new["severity"]) == ("user", ["review"], "warning")
    out = cli(["export", "--tier", "team"], root).stdout
    sec = next(json.loads(l) for l in out.splitlines() if '"sec-parameterized-queries"' in l[:40])
    assert [l["type"] for l in sec["links"]] == ["extends"]  # the old link was replaced

    # Exporting into the edited folder updates files where they are (sub/ included).
    r = cli(["export-md", str(md), "--tier", "team", "--json"], root)
    exported_now = json.loads(r.stdout)
    assert exported_now["stale"] == [] and not (md / "perf-reuse-http-clients.md").exists()
    assert (md / "sub" / "perf-reuse-http-clients.md").exists()
    # Rewritten: the deleted file(s), the edited entry (fresh updated_at) and new-rule (its
    # timestamps); the relinked file already says what the vault holds.
    assert exported_now["written"] == len(removed) + 2

    for gone in removed:
        (md / gone).unlink()
    r = cli(["import-md", str(md), "--tier", "team", "--prune", "--json"], root)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert sorted(report["prunedIds"]) == [g[:-3] for g in removed]
    assert report["unchanged"] == 210 - len(removed) + 1
    for gone in removed:
        assert stored(root, gone[:-3]) is None


def test_bad_files_are_reported_by_name_and_block_prune(tmp_path):
    root = make_vault(tmp_path / "v")
    md = tmp_path / "md"
    md.mkdir()
    (md / "good.md").write_text("---\nid: good\n---\n# Good\n\nFine.\n")
    (md / "broken.md").write_text("---\nid: broken\ntags: [a\n---\n# B\n\nx\n")
    (md / "README.md").write_text("This folder holds our team tier.\n")  # ignored by name
    (md / "dup.md").write_text("---\nid: good\n---\n# Dup\n\ny\n")
    (md / "badlink.md").write_text("---\nlinks:\n- target: nowhere\n  type: supports\n---\n"
                                   "# L\n\nz\n")
    assert cli(["capture", "--id", "orphan", "--title", "O", "--description", "o", "--tier", "team"],
               root).returncode == 0
    r = cli(["import-md", str(md), "--tier", "team", "--prune"], root)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "broken.md:4: invalid YAML" in r.stderr and "sequence at line 3" in r.stderr
    assert "dup.md: id 'good' is also used by good.md" in r.stderr
    assert "good.md: id 'good' is also used by dup.md" in r.stderr
    assert "badlink" in r.stderr and "nowhere" in r.stderr
    assert "--prune was not run" in r.stderr
    assert "1 added" in r.stdout  # badlink: its entry is stored, its link is not
    assert stored(root, "badlink") is not None
    assert stored(root, "orphan") is not None  # not pruned
    assert stored(root, "good") is None  # ambiguous: neither file imported


def test_missing_folder_and_unknown_tier_are_clear_errors(tmp_path):
    root = make_vault(tmp_path / "v")
    r = cli(["import-md", "nope", "--tier", "team"], root)
    assert r.returncode == 2 and "nope" in r.stderr and "not a directory" in r.stderr
    (root / "md").mkdir()
    r = cli(["import-md", "md", "--tier", "teem"], root)
    assert r.returncode == 2 and "teem" in r.stderr and "Traceback" not in r.stderr


def test_export_reports_and_prunes_stale_files(tmp_path):
    root = make_vault(tmp_path / "v")
    assert cli(["capture", "--id", "a", "--title", "A", "--description", "a", "--tier", "project"],
               root).returncode == 0
    (root / "md").mkdir()
    (root / "md" / "zombie.md").write_text("---\nid: zombie\n---\n# Z\n\nold\n")
    (root / "md" / "notes.md").write_text("# My notes\n\nnot an entry of the tier\n")
    r = cli(["export-md", "md", "--tier", "project"], root)
    assert r.returncode == 0 and "zombie.md" in r.stderr and (root / "md" / "zombie.md").exists()
    r = cli(["export-md", "md", "--tier", "project", "--prune", "--json"], root)
    assert json.loads(r.stdout)["pruned"] == 1 and not (root / "md" / "zombie.md").exists()
    assert (root / "md" / "notes.md").exists()  # a person's note (no front matter) is never ours
    assert (root / "md" / "a.md").read_text().startswith("---\nid: a\n")

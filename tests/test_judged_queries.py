"""The agent dev sets' judgement scripts (eval/agentset/judgements.py, ops/judgements.py)
through their shared writer (eval/judged_queries.py): run as a user runs them, in a
subprocess, they rewrite exactly the committed queries.jsonl and qrels.tsv; a graded id the
pack lacks is refused by name before a file is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval.judged_queries import JudgedQueries  # noqa: E402


@pytest.mark.parametrize("folder", ["eval/agentset", "eval/agentset/ops"])
def test_the_judgements_regenerate_the_committed_files(tmp_path: Path, folder: str) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / folder / "judgements.py"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for name in ("queries.jsonl", "qrels.tsv"):
        assert (tmp_path / name).read_text() == (ROOT / folder / name).read_text(), name


def test_ids_splits_and_grades_are_written_per_kind(tmp_path: Path) -> None:
    js = JudgedQueries({"question": "q", "keyword": "k"})
    js.q("question", "first", {"a": 2, "b": 0})
    js.q("keyword", "kw", {"b": 1}, {"domain": "x"})
    js.q("question", "second", {"c": 1})
    assert js.write(tmp_path, {"a", "b", "c"}) == {"question": 2, "keyword": 1}
    lines = (tmp_path / "queries.jsonl").read_text().splitlines()
    assert lines == ['{"id": "q01", "text": "first", "kind": "question", "split": "tune"}',
                     '{"id": "k01", "text": "kw", "kind": "keyword", "split": "tune", '
                     '"filters": {"domain": "x"}}',
                     '{"id": "q02", "text": "second", "kind": "question", "split": "report"}']
    assert (tmp_path / "qrels.tsv").read_text() == ("query_id\tentry_id\tgrade\n"
                                                   "q01\ta\t2\nk01\tb\t1\nq02\tc\t1\n")  # grade 0 left out


def test_an_id_the_pack_lacks_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    js = JudgedQueries({"question": "q"})
    js.q("question", "x", {"real": 2, "typo-id": 1})
    with pytest.raises(ValueError, match="typo-id"):
        js.write(tmp_path, {"real"})
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="'paraphrase' has no id prefix"):
        js.q("paraphrase", "y", {"real": 1})

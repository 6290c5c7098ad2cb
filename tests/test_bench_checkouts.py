"""bench/checkouts.py picks, for each checkout of an A/B, an interpreter that imports that
checkout's own code -- and refuses one that would import another checkout's (an editable
install ignores PYTHONPATH for tiervault's sub-packages: the A/B would compare one code
with itself)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.checkouts import imports_from, python_of  # noqa: E402


def test_this_checkout_gets_an_interpreter_importing_it():
    exe = python_of(ROOT)
    assert Path(imports_from(exe, ROOT)).resolve() == ROOT.resolve()


def test_a_checkout_this_interpreter_does_not_import_is_refused(tmp_path):
    other = tmp_path / "other-checkout"  # no .venv, no code: the installed tiervault answers
    other.mkdir()
    assert Path(imports_from(sys.executable, other)).resolve() != other.resolve()
    with pytest.raises(SystemExit, match="give .*other-checkout its own interpreter"):
        python_of(other)

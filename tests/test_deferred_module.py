"""vault/deferred_module.py: a module stood in for until something reads from it. A
real package written to tmp_path, imported in a fresh interpreter (sys.modules stays
this process's own), whose module records each time it runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tiervault.vault.deferred_module import DeferredModule, defer


def run(tmp_path: Path, code: str) -> str:
    pkg = tmp_path / "pkg"
    (pkg / "heavy").mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "heavy" / "__init__.py").write_text(
        "import builtins\nbuiltins.RUNS = getattr(builtins, 'RUNS', 0) + 1\nVALUE = 42\n"
        "def twice(x):\n    return 2 * x\n")
    (pkg / "heavy" / "part.py").write_text("NAME = 'part'\n")
    (pkg / "user.py").write_text("import pkg.heavy\nfrom pkg import heavy as bound\n"
                                 "def use():\n    return pkg.heavy.twice(bound.VALUE)\n")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


PRELUDE = """
import builtins, sys
from tiervault.vault.deferred_module import DeferredModule, defer
"""


def test_importers_bind_the_stand_in_and_the_first_read_runs_the_module_once(tmp_path):
    out = run(tmp_path, PRELUDE + """
stand_in = defer("pkg.heavy")
import pkg.user  # `import pkg.heavy` and `from pkg import heavy` inside: not run yet
print(getattr(builtins, "RUNS", 0), type(sys.modules["pkg.heavy"]).__name__,
      pkg.user.bound is stand_in)
print(pkg.user.use(), builtins.RUNS)  # the first read runs it
print(pkg.user.bound.VALUE, stand_in.twice(5), builtins.RUNS, type(sys.modules["pkg.heavy"]).__name__)
import pkg.heavy
print(pkg.heavy is sys.modules["pkg.heavy"], builtins.RUNS)
""")
    assert out.splitlines() == ["0 DeferredModule True", "84 1", "42 10 1 module", "True 1"]


def test_a_submodule_import_or_a_from_import_runs_the_package_first(tmp_path):
    out = run(tmp_path, PRELUDE + """
defer("pkg.heavy")
from pkg.heavy.part import NAME
print(NAME, builtins.RUNS)
""")
    assert out == "part 1"
    out = run(tmp_path, PRELUDE + """
defer("pkg.heavy")
from pkg.heavy import VALUE
print(VALUE, builtins.RUNS)
""")
    assert out == "42 1"


def test_an_imported_module_is_its_own_answer_and_a_missing_one_raises(tmp_path):
    out = run(tmp_path, PRELUDE + """
import pkg.heavy
print(defer("pkg.heavy") is pkg.heavy, builtins.RUNS)
""")
    assert out == "True 1"
    with pytest.raises(ModuleNotFoundError):
        defer("tiervault.no_such_module_here")
    assert isinstance(DeferredModule("x"), type(sys))

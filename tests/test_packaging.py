"""Packaging: one import name, and tiervault never imports a user's config.py or brain/."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import tiervault

ROOT = Path(__file__).resolve().parents[1]
# Every package the wheel ships (pyproject.toml's list: a new package is pinned at once).
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
    "packages"]
# Packages still without an explicit __all__, each with why; the test fails once one has it.
NO_ALL_YET: set[str] = set()

PROBE = """
import tiervault.config, tiervault.vault.manager, tiervault.brain, tiervault.embeddings
import tiervault.vault.entry
for mod in (tiervault.config, tiervault.vault.manager, tiervault.brain, tiervault.embeddings):
    assert 'shadow' not in mod.__file__, mod.__file__
print('ok', tiervault.config.__file__)
"""


def _shadowed_dir(tmp_path: Path) -> Path:
    work = tmp_path / "shadow"
    (work / "brain").mkdir(parents=True)
    (work / "config.py").write_text("raise RuntimeError('user config.py imported')\n")
    (work / "vault.py").write_text("raise RuntimeError('user vault.py imported')\n")
    (work / "brain" / "__init__.py").write_text("raise RuntimeError('user brain imported')\n")
    (work / "embeddings").mkdir()
    (work / "embeddings" / "__init__.py").write_text("raise RuntimeError('user embeddings')\n")
    return work


def test_installed_package_ignores_shadowing_modules_in_cwd(tmp_path):
    work = _shadowed_dir(tmp_path)
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=work, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": ""}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")


def test_wheel_layout_maps_folders_under_one_import_name(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(dist), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    wheel = next(dist.glob("tiervault-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for required in ["tiervault/__init__.py", "tiervault/vault/store.py", "tiervault/brain/__init__.py",
                     "tiervault/embeddings/base.py", "tiervault/config/loader.py",
                     "tiervault/vault/packs/starter.jsonl", "tiervault/cli/__init__.py",
                     "tiervault/web/templates/base.html", "tiervault/web/static/style.css"]:
        assert required in names, required
    assert not any(n.startswith(("config/", "vault/", "brain/", "embeddings/")) for n in names)
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    work = _shadowed_dir(tmp_path)
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=work, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(target)}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert str(target) in r.stdout


@pytest.mark.parametrize("name", [n for n in PACKAGES if n not in NO_ALL_YET])
def test_all_matches_public_names(name):
    module = importlib.import_module(name)
    declared = set(getattr(module, "__all__", ()))
    # dir(), not vars(): the package root imports its classes on first use (PEP 562)
    public = {n for n in dir(module)
              if not n.startswith("_") and not isinstance(getattr(module, n), type(os))
              and n not in {"annotations", "__version__"}}
    assert declared, f"{name} has no __all__"
    assert declared == public, f"{name}: __all__ differs from public names: {declared ^ public}"
    for n in declared:
        assert hasattr(module, n)


def test_the_packages_without_all_are_still_without_it():
    assert len(PACKAGES) >= 10 and "tiervault.vault.postgres" in PACKAGES
    for name in NO_ALL_YET:  # a package that gained its __all__ leaves the list
        assert name in PACKAGES and not hasattr(importlib.import_module(name), "__all__"), name


def test_no_bare_imports_of_project_folders():
    offenders = []
    for path in ROOT.glob("**/*.py"):
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            s = line.strip()
            if s.startswith(("import config", "import vault", "import brain", "import embeddings",
                             "from config", "from vault", "from brain", "from embeddings")):
                offenders.append(f"{path}: {s}")
    assert offenders == []
    assert tiervault.__name__ == "tiervault"


def test_the_command_line_starts_without_the_search_stack():
    """``import tiervault.cli`` (every command's first step, and the servers' restart on huge
    pages) must not import the Brain, the vault or NumPy: the package root is lazy."""
    probe = ("import sys, tiervault.cli; "
             "print(sorted(m for m in ('tiervault.brain', 'tiervault.vault', 'tiervault.config', 'numpy')"
             " if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
    r = subprocess.run([sys.executable, "-c", "import tiervault as t; from tiervault import Filters; "
                        "print(t.Brain.__module__, Filters.__module__, t.load_settings.__module__)"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["tiervault.brain.brain", "tiervault.vault.filters",
                                "tiervault.config.loader"], r.stdout

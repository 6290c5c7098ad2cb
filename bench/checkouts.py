"""Two checkouts timed against each other (the A/B scripts' shared part:
``write_ab.py``, ``build_ab.py``).

Each run is a fresh process started with the checkout's own ``.venv`` interpreter and
``PYTHONPATH`` set to the checkout, so it imports that checkout's ``tiervault``; the
caller's ``TIERVAULT_*`` settings are dropped so both sides run with the defaults
(plus any ``KEY=VALUE`` given for one side). The worker prints its result as JSON on
its last stdout line.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["ab_parser", "checkout_env", "commit_of", "imports_from", "load_avg", "python_of", "run_worker"]


def load_avg() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 0.01."""
    return [round(x, 2) for x in os.getloadavg()]


def python_of(checkout: Path) -> str:
    """The checkout's ``.venv`` interpreter, else this one -- provided it imports the
    checkout's own code with ``PYTHONPATH`` set to it (:func:`imports_from`): an
    interpreter with an editable install of another checkout (a worktree's ``.venv``)
    imports ``tiervault``'s sub-packages from that one whatever ``PYTHONPATH`` says, so an
    A/B against a checkout without a ``.venv`` would time (or compare) one code twice."""
    python = checkout / ".venv" / "bin" / "python"
    exe = str(python) if python.exists() else sys.executable
    where = imports_from(exe, checkout)
    if Path(where).resolve() != checkout.resolve():
        raise SystemExit(f"{exe} imports tiervault.embeddings from {where}, not from {checkout}: "
                         f"give {checkout} its own interpreter (python3 -m venv --system-site-packages "
                         f"{checkout}/.venv && {checkout}/.venv/bin/pip install -e {checkout} --no-deps)")
    return exe


@functools.lru_cache(maxsize=None)
def imports_from(exe: str, checkout: Path) -> str:
    """The checkout directory ``exe`` imports ``tiervault.embeddings`` from when run with
    ``PYTHONPATH`` = ``checkout`` (the parent of the package's folder)."""
    code = "import os, tiervault.embeddings as e; print(os.path.dirname(os.path.dirname(e.__file__)))"
    proc = subprocess.run([exe, "-c", code], stdout=subprocess.PIPE, text=True,
                          env=checkout_env(checkout), timeout=120, check=True)
    return proc.stdout.strip().splitlines()[-1]


def checkout_env(checkout: Path, extra: Sequence[str] = ()) -> dict[str, str]:
    """This environment without ``TIERVAULT_*``, importing from ``checkout``, plus ``extra``
    (``KEY=VALUE`` items)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["PYTHONPATH"] = str(checkout)
    env.update(item.split("=", 1) for item in extra)
    return env


def commit_of(checkout: Path) -> str | None:
    """The checkout's short HEAD, or None when it is not a git checkout."""
    try:
        return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def run_worker(checkout: Path, script: str, args: Sequence[str],
               extra_env: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``script --_worker ARGS`` in ``checkout``'s interpreter; its last stdout line,
    parsed as JSON. A failing worker raises with the checkout and its exit status."""
    cmd = [python_of(checkout), script, "--_worker", *args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,
                          env=checkout_env(checkout, extra_env), timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"worker in {checkout} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ab_parser(doc: str) -> argparse.ArgumentParser:
    """The options every A/B script takes: ``--a``/``--b`` (checkouts), ``--entries``
    (100,000), ``--rounds`` (2), ``--seed`` (7), ``--a-commit``, ``--b-commit``, ``--json``; the
    description is ``doc``'s first line."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (before)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (after)")
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--a-commit", help="A's commit, when A is not a git checkout (git archive)")
    ap.add_argument("--b-commit", help="B's commit, when B is not a git checkout")
    ap.add_argument("--json", type=Path)
    return ap

"""vault/lazy_sparse.py: a search over caught-up mirrors whose latent rows were saved
with the build (the bench's cold open + first query, a small base read whole as at
100K, a large one by row as at 1M) never imports SciPy, 0.1-0.26 s of a fresh process's
import; what needs ``scipy.sparse`` (a catch-up of new rows) imports it then and answers
as before. Fresh processes: the test process has SciPy already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tiervault.brain.brain import Brain
from tiervault.vault import latent as vlatent
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager

QUERY = "q12z q7z q400z"

SEARCH = textwrap.dedent("""
    import json, sys
    from tiervault.brain.brain import Brain
    from tiervault.vault import latent
    latent.EAGER_BASE_BYTES = int(sys.argv[3])  # as in the building process
    before = "scipy" in sys.modules
    brain = Brain.open(sys.argv[1])
    ids = [r["id"] for r in brain.search_intelligent(sys.argv[2], mode="scan")]
    print(json.dumps({"before": before, "after": "scipy" in sys.modules, "ids": ids}))
""")


def search_in_a_fresh_process(config, eager_bytes: int) -> dict:
    out = subprocess.run([sys.executable, "-c", SEARCH, str(config), QUERY, str(eager_bytes)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("eager_bytes", [1024, vlatent.EAGER_BASE_BYTES], ids=["by-row", "whole"])
def test_a_search_over_caught_up_mirrors_imports_no_scipy(tmp_path, monkeypatch, eager_bytes) -> None:
    monkeypatch.setattr(vlatent, "MAX_FIT_ROWS", 1000)
    monkeypatch.setattr(vlatent, "EAGER_BASE_BYTES", eager_bytes)  # 1024: a large base, as at 1M
    rng = np.random.default_rng(4)
    words = [f"q{i}z" for i in range(3000)]
    entries = [Entry.create(id=f"e{i}", title=" ".join(rng.choice(words, 4)),
                            description=" ".join(rng.choice(words, 30))) for i in range(2000)]
    db = tmp_path / "agent.db"
    config = tmp_path / "agent.yaml"
    config.write_text(f"agent_id: t\ntiers:\n  agent: {json.dumps(str(db))}\n", encoding="utf-8")
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many(entries)
    brain = Brain.open(config)  # builds the mirror and saves its cache
    want = [r["id"] for r in brain.search_intelligent(QUERY, mode="scan")]
    brain.close()
    assert want

    got = search_in_a_fresh_process(config, eager_bytes)
    assert got == {"before": False, "after": False, "ids": want}

    # a new row since the cache: the catch-up builds a delta (SciPy matrices) and answers
    new = Entry.create(id="new", title="q12z q7z q400z", description="q12z q7z q400z q12z")
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many([new])
    got = search_in_a_fresh_process(config, eager_bytes)
    assert got["before"] is False and got["after"] is True
    assert got["ids"][0] == "new"

"""tiervault.brain: seven-signal rescoring and the ``search_intelligent`` facade.

    from tiervault.brain import Brain
    with Brain.open("agent.yaml") as brain:
        rows = brain.search_intelligent("jwt rotation", mode="scan")
        full = brain.load_entries([r["id"] for r in rows[:3]])
        brain.feedback("jwt rotation", rows[0]["id"], "accepted")

Modules: :mod:`signals` (the seven pure signal functions), :mod:`weights`
(seed sets, overrides, adaptation), :mod:`feedback` (recording, entry nudge),
:mod:`graph` (link hops), :mod:`memories` (memories on the entry scale),
:mod:`pool` (candidate assembly), :mod:`shapes` (row TypedDicts),
:mod:`vectors` (what the Brain needs from dense vectors), :mod:`brain`.
"""

from tiervault.brain.brain import Brain
from tiervault.brain.shapes import SIGNALS
from tiervault.brain.weights import WeightSet

__all__ = ["Brain", "SIGNALS", "WeightSet"]

"""A warm FTS-only scan's lexical calls timed by kind: the top k by query, TF-IDF by size, look-ups by memo.

    python bench/s20_lex_kinds.py --workdir DIR [--queries 400] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase. After 30 warm-up scans,
``--queries`` bench scans run with a wall clock (``time.perf_counter_ns``) around

* each tier's top k (``MirrorLexicon._pick``), by kind of query: ``restricts`` (a category
  or tag filter; ``-tags`` with a tag), ``sparse`` (postings under 1/8 of the tier's slots),
  ``dense-floored`` (a term in 1/8 of the slots or more with idf <= 0.05: a common word),
  ``dense-other`` (big columns, none that common);
* ``tfidf_query.scores_at`` (as ``Postings.tfidf_at`` calls it), by (slots x query terms):
  <= 8, <= 16, <= 28, <= 40, more;
* ``StringTable.held``, by how many strings are asked: <= 8 (a graph neighbour's ids), more
  (LSA's and the pool's ~20 candidates, mostly remembered from the top k).

us a scan and a call; run it with each checkout's interpreter (a part missing from a
checkout is left out). Issue 16, session 20 (bench/README.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402
from bench.profiling import CallTimers  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import tiervault.vault
    from tiervault.brain.brain import Brain
    from tiervault.vault import lexicon, postings, string_table

    timers = CallTimers()
    spent, calls, timed = timers.spent, timers.calls, timers.wrap

    def pick_kind(self: Any, p: Any, terms: Any, stats: Any, filters: Any, k: int) -> str:
        slots, n, idf = p.matches(terms).slots, len(p.doclen), stats.idf().tolist()
        if filters.restricts:
            return "pick: restricts" + ("-tags" if filters.tags else "")
        if sum(s.size for s in slots) * 8 < n:
            return "pick: sparse"
        common = any(s.size * 8 >= n and i <= 0.05 for s, i in zip(slots, idf))
        return "pick: dense-floored" if common else "pick: dense-other"

    def tfidf_kind(q: Any, slots: Any, *a: Any, **kw: Any) -> str:
        pairs = slots.size * q[0].size
        return "tfidf_at pairs: " + next((f"<= {b}" for b in (8, 16, 28, 40) if pairs <= b), "> 40")

    def held_kind(self: Any, strings: Any) -> str:
        return "held: " + ("<= 8 strings" if len(strings) <= 8 else "> 8 strings")

    lexicon.MirrorLexicon._pick = timed(lexicon.MirrorLexicon._pick, pick_kind)
    postings.scores_at = timed(postings.scores_at, tfidf_kind)
    string_table.StringTable.held = timed(string_table.StringTable.held, held_kind)
    brain = Brain.open(write_config(args.workdir))
    for q in queries(30, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    timers.clear()

    load_before = load_avg()
    for q in queries(args.queries, 7):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    n = args.queries
    order = sorted(spent)
    emit({"checkout": str(Path(tiervault.vault.__file__).resolve().parent.parent), "workdir": str(args.workdir),
          "queries": n, "load_before": load_before, "load_after": load_avg(),
          "us_a_scan": {k: round(spent[k] / n / 1e3, 1) for k in order},
          "calls_a_scan": {k: round(calls[k] / n, 3) for k in order},
          "us_a_call": {k: round(spent[k] / calls[k] / 1e3, 1) for k in order}}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Two checkouts rank alike when a change moves scores by rounding only: every answer of
``search_intelligent`` compared by its rows' ids in order, and the scores' largest moves.

    python bench/s24_rank_order.py --a /path/main --b /path/branch --workdir-a DIR_A \
        --workdir-b DIR_B [--queries 150] [--hybrid [--dim 384]] [--json out.json]

``bench/rank_compare.py`` asks the rows equal bit for bit (every score of ``explain``),
in one work directory: right for a change that keeps every float. A change that refits
the latent model (issue 16, session 24: the SVD over the sample's present terms) moves
its scores in the last bits, and each checkout must build its own mirror caches (the
one that built first would hand its V_k to the other): so each checkout answers in its
own copy of a ``bench/run.py`` work directory (``DIR_A``, ``DIR_B``, their mirror caches
deleted), through rank_compare's worker (the same queries, modes and instant). The
rankings are identical when every answer lists the same ids in the same order; the
report also counts the answers equal bit for bit and gives the largest difference of
each score field (``score`` and the ``explain`` breakdown's numbers).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: a worker imports its own checkout's tiervault

from bench.checkouts import checkout_env, load_avg, python_of  # noqa: E402
from bench.output import emit  # noqa: E402

RANK_COMPARE = Path(__file__).resolve().parent / "rank_compare.py"


def row_id(row: dict[str, Any]) -> str:
    """A row's tier and entry id (a scan row's ``id``, a full row's ``entry["id"]``)."""
    eid = row["id"] if "id" in row else row["entry"]["id"]
    return f"{row['tier']}:{eid}"


def numbers(value: Any, prefix: str = "") -> dict[str, float]:
    """Every number inside ``value`` (dicts and lists walked), by its path."""
    out: dict[str, float] = {}
    if isinstance(value, bool):
        return out
    if isinstance(value, (int, float)):
        out[prefix] = float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            out.update(numbers(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.update(numbers(v, f"{prefix}[]"))
    return out


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Answers in the same order: ids in order equal? bits equal? largest move per field."""
    order_differs, bit_differs, moves = [], 0, {}
    for x, y in zip(a, b):
        if [row_id(r) for r in x["rows"]] != [row_id(r) for r in y["rows"]]:
            order_differs.append(f"{x['query']} / {x['mode']}")
        if x != y:
            bit_differs += 1
        for rx, ry in zip(x["rows"], y["rows"]):
            nx, ny = numbers(rx), numbers(ry)
            for key in nx.keys() & ny.keys():
                d = abs(nx[key] - ny[key])
                if d > moves.get(key, 0.0):
                    moves[key] = d
    return {"answers": len(a), "rows": sum(len(x["rows"]) for x in a),
            "ranking_identical": len(a) == len(b) and not order_differs,
            "order_differing": len(order_differs), "first_order_differing": order_differs[:5],
            "bit_identical_answers": len(a) - bit_differs,
            "largest_moves": dict(sorted(((k, v) for k, v in moves.items() if v), key=lambda kv: -kv[1])[:12])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, required=True)
    ap.add_argument("--workdir-a", type=Path, required=True)
    ap.add_argument("--workdir-b", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--hybrid", action="store_true", help="rank with the hash embedder's vectors")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    answers = {}
    for name, checkout, workdir in (("A", args.a, args.workdir_a), ("B", args.b, args.workdir_b)):
        out = workdir / f"rank-{name}.json"
        cmd = [python_of(checkout), str(RANK_COMPARE), "--workdir", str(workdir),
               "--queries", str(args.queries), "--seed", str(args.seed), "--_worker", str(out)]
        cmd += ["--hybrid", "--dim", str(args.dim)] if args.hybrid else []
        subprocess.run(cmd, check=True, env=checkout_env(checkout))
        answers[name] = json.loads(out.read_text(encoding="utf-8"))
        out.unlink()
    report = {"a": str(args.a), "b": str(args.b), "queries": args.queries, "hybrid": args.hybrid,
              **compare(answers["A"], answers["B"]), "load": load_avg()}
    emit(report, args.json)
    return 0 if report["ranking_identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

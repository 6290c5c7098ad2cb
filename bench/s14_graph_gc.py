"""Issue 16, session 14 probe: a tier's link graph built after its mirror (as a build worker does), CPU with the
cyclic GC on / off.  .venv/bin/python bench/s14_graph_gc.py TIER.db NAME on|off
"""
import sys, time, gc, os
from tiervault.vault.store import TierStore
from tiervault.vault.postings import Postings
db, name, mode = sys.argv[1], sys.argv[2], sys.argv[3]
for suffix in (".postings.mirror", ".links.graph"):
    if os.path.exists(db + suffix): os.unlink(db + suffix)
store = TierStore(db, name=name)
m = Postings.build(store)
print("gc counts", gc.get_count(), "objects", len(gc.get_objects()))
if mode == "off": gc.disable()
t0, c0 = time.perf_counter(), time.process_time()
store.graph.current()
print(mode, "graph wall %.3f cpu %.3f" % (time.perf_counter() - t0, time.process_time() - c0), flush=True)

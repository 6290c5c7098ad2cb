"""Issue 16, session 15 probe: system CPU of writing 436 MB (the 1M team tier's mirror
cache) into the page cache, three times in one process, while holding MB_HELD MB.

    python bench/s15_write_cost.py MB_HELD     (prints one line per write)

On this machine (a Firecracker guest with virtio-balloon / virtio-mem) the first write
of a process often costs ~10x the next ones (fresh pages the host must back again).
"""
import numpy as np, os, resource, time, sys
def ru():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime, r.ru_stime, time.perf_counter()
big = np.ones(int(sys.argv[1]) << 20, dtype=np.uint8)  # held, like the worker's memory
a = np.ones(436<<20, dtype=np.uint8)
for k in range(3):
    p = f"/tmp/build15/wtest3"
    u0,s0,w0 = ru()
    with open(p, "wb") as fh:
        fh.write(memoryview(a))
    u1,s1,w1 = ru()
    print(sys.argv[1], k, "write sys %.3f wall %.3f" % (s1-s0, w1-w0), flush=True)
    os.unlink(p)

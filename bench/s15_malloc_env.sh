#!/bin/bash
# Issue 16, session 15 probe (bench/README.md): one tier's worker build (bench/s14_one_tier.sh) with
# glibc's heap only (no mmap, never trimmed) against the default, alternating; usage: s15_malloc_env.sh (edit DB)
cd /work/wt/s15-build
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736:glibc.malloc.top_pad=16777216
for r in 1 2; do
  echo "default r$r load $(cut -d' ' -f1 /proc/loadavg)"; bench/s14_one_tier.sh /work/wt/s15-build /tmp/build15/ab2/copy-B/team.db team 2>&1 | tail -1
  echo "heap-only r$r load $(cut -d' ' -f1 /proc/loadavg)"; bench/s14_one_tier.sh /work/wt/s15-build /tmp/build15/ab2/copy-B/team.db team GLIBC_TUNABLES=$T 2>&1 | tail -1
done

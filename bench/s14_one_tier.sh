#!/bin/bash
# Issue 16, session 14 probe (bench/README.md): the build worker's build of ONE tier (worker_main), timed by
# /usr/bin/time (wall, user, sys, max RSS, minor faults); TREE = a checkout with its .venv.
# usage: one_tier.sh TREE DB NAME [env...]: the worker's build of one tier, timed, page faults counted
tree=$1; db=$2; name=$3; shift 3
rm -f $db.postings.mirror $db.links.graph
cd $tree && env OPENBLAS_THREAD_TIMEOUT=4 TIERVAULT_MIRROR_WORKERS=0 "$@" /usr/bin/time -f "wall %e user %U sys %S maxrss %M KB minflt %R" .venv/bin/python -c "import sys; from tiervault.vault.mirror_workers import worker_main; sys.exit(worker_main(sys.argv[1:]))" $tree/vault/postings.py $db $name

"""First builds of several tiers' search mirrors at once, in worker processes.

Why: a manager's first FTS search builds the mirror (:mod:`postings`) of every tier
that has no usable cache file, one after another, before it can answer (three tiers
of 1,000,000 entries: ~35 s of CPU in one process, bench/README.md). The builds are
independent and each one's product is a file (``<tier>.postings.mirror``, written
atomically by :mod:`mirror_cache`), so ``min(cores, tiers)`` child processes build
them and the searching process then maps the files, as it maps any cache; it never
holds a build's intermediate arrays (2.9 GB at 1M when it built all three itself).
A process start and its imports cost ~1.3 s of CPU, so there is one process per
core, not per tier (:func:`plan`: largest tier file first, each to the least loaded
worker), and only when the tier files to build add up to ``MIN_BYTES``. On Linux one
process is started; once its imports are done it forks a process per further share
(the imports paid once), while the searching process, otherwise idle, builds the
tiers' link graphs (:func:`build_missing`): a worker builds mirrors only.

A worker is ``python -c <worker_main> MODULE PATH NAME [PATH NAME ...]`` (this
interpreter, this environment), not a multiprocessing child: spawn and forkserver
import the caller's ``__main__`` again in each child (a script without a main guard
would run twice), and fork copies a process that may hold threads and open SQLite
connections (a worker forks itself only after its imports, holding no connection to
a tier file). It opens each tier by itself, builds and saves its mirror
(:meth:`Postings.build`: the same code as in-process, so the same arrays) and
prints one JSON line per tier (``--split=N,M`` before the pairs: the tiers of each
forked share). ``MODULE`` is the path of the caller's
:mod:`postings`: a worker that imports another tiervault refuses before building.

Failure: a tier whose worker fails (exit status, no answer, another tiervault, no
fitting cache file afterwards) is logged as a warning naming the tier and why, and
is then built in this process by the ordinary path, as without workers. A worker
killed halfway leaves the old cache or none (the write is a rename), at most a
``.tv-tmp`` file beside the tier. Writes made during a build are caught up by the
searching process (:meth:`Postings.catch_up`), as after any cache load.

A worker's environment is this one plus ``OPENBLAS_THREAD_TIMEOUT=4`` (unless set):
OpenBLAS threads then sleep at once when idle instead of spinning,
``NUMPY_MADVISE_HUGEPAGE=0`` (unless set): no huge-page advice on the build's large
temporary arrays (see :func:`run_jobs`), and glibc's heap only (:func:`heap_only`).

``TIERVAULT_MIRROR_WORKERS``: the most worker processes (default: the cores this
process may run on); 0 or 1 builds every tier in this process.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from tiervault.huge_pages import restart_undone, tunable_names, tunables_with
from tiervault.vault import mirror_cache
from tiervault.vault.deferred_module import defer

__all__ = ["BLAS_SPIN_ENV", "HEAP_TUNABLES", "HUGEPAGE_ENV", "MIN_BYTES", "MirrorJob", "WorkerOutcome", "build_missing",
           "heap_only", "job_of", "plan", "run_jobs", "worker_count", "worker_main", "worker_process"]

log = logging.getLogger(__name__)

_ENV = "TIERVAULT_MIRROR_WORKERS"
BLAS_SPIN_ENV = "OPENBLAS_THREAD_TIMEOUT"
HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"
_LOCK = threading.Lock()  # one set of workers at a time: a second first search waits, then maps
#: Workers only when the tier files to build hold this many bytes: a worker's start and
#: imports cost ~1.3 s of CPU, won back only by larger builds. Bench corpus (~930 bytes a
#: row), quiet machine (load ~1.5), first search, in-process -> 2 workers: 100,000 entries
#: (95 MB) 4.0-4.2 -> 3.8-4.0 s wall for 4.7-4.9 -> 7.4-7.6 s CPU (not worth it); 1,000,000
#: (930 MB) 28.7-33.6 -> 17.3-17.4 s wall, CPU 30-32 -> 33 s (bench/README.md).
MIN_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class MirrorJob:
    """What a worker needs to build one tier's mirror: the tier file and its name."""

    name: str
    path: str
    size: int  # bytes of the tier file: the order of the jobs (largest first)


@dataclass(frozen=True, slots=True)
class WorkerOutcome:
    """One worker's end: its answer (``rows``, seconds) or why it failed (``error``)."""

    name: str
    ok: bool
    error: str = ""
    rows: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0


def worker_count() -> int:
    """``TIERVAULT_MIRROR_WORKERS`` if set, else the cores this process may run on."""
    raw = os.environ.get(_ENV, "").strip()
    if raw:
        try:
            return max(0, int(raw))
        except ValueError:
            log.warning("%s=%r is not a whole number; building mirrors in this process", _ENV, raw)
            return 0
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def build_missing(stores: Iterable[Any]) -> list[WorkerOutcome]:
    """Build the mirror caches of ``stores`` that need a first build in worker
    processes, when two or more do and two or more workers are allowed; returns the
    workers' outcomes (empty: nothing done here, every tier builds in-process)."""
    stores = list(stores)
    if len(stores) < 2:
        return []
    with _LOCK:
        # the jobs first: a search's usual answer is none (every mirror in memory), without
        # the environment and the affinity read (~10 us a search, issue 16 session 17)
        jobs = [j for j in (_job_of(s) for s in stores) if j is not None]
        if len(jobs) < 2 or sum(j.size for j in jobs) < MIN_BYTES:
            return []
        workers = worker_count()
        if workers < 2:
            return []
        names = {j.name for j in jobs}
        outcomes = run_jobs(jobs, min(workers, len(jobs)),
                            meanwhile=lambda: _link_graphs([s for s in stores if s.name in names]))
    by_name = {s.name: s for s in stores}
    log.info("built the search mirrors of tiers %s in %d worker processes (%s)",
             ", ".join(o.name for o in outcomes), min(workers, len(jobs)),
             "; ".join(f"{o.name}: {o.rows} rows, {o.wall_s:.1f} s wall, {o.cpu_s:.1f} s CPU"
                       if o.ok else f"{o.name}: failed" for o in outcomes))
    checked = []
    for o in outcomes:
        if o.ok and not mirror_cache.fits(by_name[o.name]):
            o = WorkerOutcome(o.name, False, "the worker ended but left no cache file that fits the tier")
        if not o.ok:
            log.warning("search mirror of tier %r: the worker process failed (%s); building it "
                        "in this process", o.name, o.error)
        checked.append(o)
    return checked


def _link_graphs(stores: Sequence[Any]) -> None:
    """The link graphs of the tiers the workers build (mapped, or built and saved), in
    this otherwise idle process while the workers start: a worker then builds the
    mirror only (1M bench tiers: ~0.3-0.5 s of CPU each off the workers). A tier whose
    graph fails here is logged; its search meets the failure again and answers by SQL
    or leaves the tier out, as without workers."""
    for store in stores:
        try:
            store.graph.current()  # a TierStore's link graph (vault/link_graph.py): mapped or built
        except Exception as exc:  # noqa: BLE001 -- logged; the tier's own search path reports it
            log.warning("link graph of tier %r: %s: %s (left to the search)", store.name,
                        type(exc).__name__, str(exc)[:200])


def _job_of(store: Any) -> MirrorJob | None:
    job = getattr(store, "mirror_job", None)  # SQLite tiers only (a file another process opens)
    return job() if job is not None else None


def job_of(store: Any) -> MirrorJob | None:
    """The job building ``store``'s mirror cache (an SQLite tier without a mirror in
    memory), or None when its cache file fits already or could not be written
    (read-only, missing tier file, folder not writable) or the tier fails to answer
    (the ordinary path then raises its own error)."""
    if store.read_only or not store.exists or not os.access(store.path.parent, os.W_OK):
        return None
    try:
        if mirror_cache.fits(store):
            return None
    except mirror_cache.StoreFailure:
        return None
    return MirrorJob(store.name, str(store.path), store.file_size())


def plan(jobs: Sequence[MirrorJob], workers: int) -> list[list[MirrorJob]]:
    """The jobs of each worker process: largest tier file first, each to the worker with
    the fewest bytes so far (a process start and its imports cost ~1.3 s of CPU: one
    process per core, not per tier)."""
    loads = [[0, i, []] for i in range(max(1, min(workers, len(jobs))))]
    for job in sorted(jobs, key=lambda j: -j.size):
        least = min(loads, key=lambda w: (w[0], w[1]))
        least[0] += job.size
        least[2].append(job)
    return [w[2] for w in loads if w[2]]


def run_jobs(jobs: Sequence[MirrorJob], workers: int, *, python: str | None = None,
             meanwhile: Callable[[], None] | None = None) -> list[WorkerOutcome]:
    """Build ``jobs`` in at most ``workers`` processes at once (:func:`plan`), each
    process its tiers one after another (on Linux one started process forks the
    others after its imports); ``python``: the interpreter (default: this one);
    ``meanwhile``: run in this process once the workers started. Interrupted (e.g.
    Ctrl-C), it kills the workers it started and re-raises."""
    from tiervault.vault import postings  # the module a worker must import too

    python = python or sys.executable
    env = {**os.environ, _ENV: "0"}  # a worker builds in its own process: no workers of its own
    # Without what `serve` / `mcp`'s restart on 2 MiB pages added (tiervault/huge_pages.py): on
    # glibc's heap and Python's objects there, a 1M first build's workers took +17 % CPU
    # (bench/README.md, issue 16 session 15). A user's own settings stay.
    env = restart_undone(env)
    # OpenBLAS's idle threads spin 2^28 cycles (~0.1 s) after every call before they sleep:
    # in the latent fit's many small LAPACK calls, with two workers on two cores, they
    # burnt CPU the other worker needed (205,493-row tier: 6.5-6.7 -> 5.1 s CPU). 4, the
    # least, changes no result (the same threads compute the same blocks; tested).
    env.setdefault(BLAS_SPIN_ENV, "4")
    # NumPy asks for transparent huge pages on every array of 4 MB+ (madvise): a build
    # makes and frees hundreds of them, and here (THP "madvise", defrag "madvise") each
    # fault of a fresh 2 MB page cost more system time than the 4 KB ones it saves
    # (205,913-row tier, one process, 2 runs each: 1.18-1.27 -> 0.79-0.80 s of system
    # CPU, wall 6.60 -> 6.23 s; issue 16, session 14). Memory advice only: same arrays.
    env.setdefault(HUGEPAGE_ENV, "0")
    env = heap_only(env)
    running: list[tuple[list[MirrorJob], subprocess.Popen, Any, Any]] = []
    outcomes: list[WorkerOutcome] = []
    shares = plan(jobs, workers)
    sessions: set[int] = set()  # workers started in a session (process group) of their own
    # One process forks the others once its imports are done (their ~1.1 s of CPU paid
    # once, not per share; issue 16, session 15): Linux only (fork after NumPy and
    # OpenBLAS's threads started is safe there; macOS's frameworks are not fork-safe).
    groups = [shares] if len(shares) > 1 and _forks() else [[s] for s in shares]
    try:
        for group in groups:
            share = [j for s in group for j in s]
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # no pipe to fill
            args = [a for j in share for a in (j.path, j.name)]
            if len(group) > 1:
                args.insert(0, _SPLIT + ",".join(str(len(s)) for s in group))
            try:
                # forking: a process group of its own, so that an interrupt kills the forks too
                proc = subprocess.Popen([python, "-c", _WORKER_CODE, str(postings.__file__), *args],
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                        start_new_session=len(group) > 1)
            except OSError as exc:
                out.close()
                err.close()
                outcomes += [WorkerOutcome(j.name, False, f"could not start {python}: {exc}")
                             for j in share]
                continue
            running.append((share, proc, out, err))
            if len(group) > 1:
                sessions.add(proc.pid)
        if meanwhile is not None:
            meanwhile()
        for share, proc, out, err in running:
            proc.wait()
        outcomes += [o for item in running for o in _outcomes(*item)]
        running = []
    finally:
        for share, proc, out, err in running:  # only when interrupted
            if proc.pid in sessions:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the worker and the shares it forked
                except OSError:
                    pass  # the group is gone: every process in it ended
            proc.kill()
            proc.wait()
            out.close()
            err.close()
    return outcomes


#: glibc's malloc for a worker: every block from the heap (no mmap), the heap never given
#: back to the kernel while the worker lives (it ends after its builds)
HEAP_TUNABLES = ("glibc.malloc.mmap_max=0", "glibc.malloc.trim_threshold=68719476736")


def heap_only(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` with :data:`HEAP_TUNABLES` added to ``GLIBC_TUNABLES`` (each one the
    user did not set; none when the user put glibc's heap on huge pages: their heap).

    Why: a build makes and frees arrays of 32 MB+ by the hundred (the postings'
    transposition, the SVD's (terms x 26) blocks ...), each one mapped fresh by glibc
    and unmapped when freed, so every page of every one was faulted in and zeroed again:
    ~0.8M minor faults for the 1M team tier's build, 2.2-2.5 s of system CPU on this
    machine (whose fresh pages cost several us each). From the heap, freed blocks are
    reused: 0.32M faults, system CPU -0.8..-1.0 s for +0.3..0.45 s user (issue 16,
    session 16, bench/README.md). Memory advice only: the same arrays."""
    env = dict(environ)
    tunables = env.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.hugetlb" not in tunable_names(tunables):
        env["GLIBC_TUNABLES"] = tunables_with(tunables, HEAP_TUNABLES)
    return env


def _outcomes(share: list[MirrorJob], proc: subprocess.Popen, out: Any,
              err: Any) -> list[WorkerOutcome]:
    """Each job's answer (a JSON line on the worker's stdout) or why there is none; the
    worker's stderr is relayed as warnings (e.g. "ignoring the search cache ...")."""
    try:
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace").strip()
    finally:
        out.close()
        err.close()
    answers: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        try:
            answer = json.loads(line)
            answers[str(answer["name"])] = answer
        except (KeyError, TypeError, ValueError):
            continue  # not an answer (a library printed something)
    if proc.returncode == 0:
        for line in stderr.splitlines():
            log.warning("search mirror worker (tiers %s): %s", ", ".join(j.name for j in share), line)
    why = (f"exit status {proc.returncode}: {stderr.splitlines()[-1] if stderr else 'no message'}"
           if proc.returncode != 0 else "no answer on its stdout")
    outcomes = []
    for job in share:
        a = answers.get(job.name)
        if a is None:
            outcomes.append(WorkerOutcome(job.name, False, why))
            continue
        outcomes.append(WorkerOutcome(job.name, True, rows=int(a["rows"]), wall_s=float(a["wall_s"]),
                                      cpu_s=float(a["cpu_s"])))
    return outcomes


def _forks() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


_SPLIT = "--split="  # worker argument: tiers per forked share
# Run with -c, not -m: ``python -m`` of a module its own package imports warns (runpy)
_WORKER_CODE = "import sys; from tiervault.vault.mirror_workers import worker_process; " \
               "worker_process(sys.argv[1:])"


def worker_process(argv: Sequence[str]) -> None:
    """A worker process's whole life: :func:`worker_main`, then out at once with its
    status. Its output is flushed; what Python's exit would do besides (free every object
    and module of a 1M tier's build one by one: ~0.2 s, while the searching process waits
    for this exit) is left to the kernel, which frees the process's memory anyway (issue
    16, session 17). An exception leaves as from any script (traceback, status 1)."""
    code = worker_main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def worker_main(argv: Sequence[str]) -> int:
    """A worker: ``MODULE PATH NAME [PATH NAME ...]``; builds and saves each tier's mirror
    in turn and prints one JSON line per tier built."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    from tiervault.vault import postings
    from tiervault.vault.store import TierStore

    module, pairs = argv[0], argv[1:]
    if os.path.realpath(str(postings.__file__)) != os.path.realpath(module):
        print(f"this interpreter imports {postings.__file__}, the caller {module}: "
              "not building a cache the caller could not use", file=sys.stderr)
        return 3
    # scikit-learn's every import runs ``import scipy.stats`` (sklearn.utils.fixes), which
    # the build never uses: ~0.3-0.5 s of the worker's start, before the shares can fork
    # (issue 16, session 17). Imported if and when something reads from it.
    defer("scipy.stats")
    shares = _shares(pairs)
    if len(shares) == 1:
        return _build(shares[0], postings.Postings, TierStore)
    _preload()
    children = []
    for share in shares[1:]:
        pid = os.fork()
        if pid == 0:  # the child: its share, then out without the parent's exit handlers
            code = 1
            try:
                code = _build(share, postings.Postings, TierStore)
            except BaseException:  # noqa: BLE001 -- reported on stderr, the exit status says it
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children.append(pid)
    code = _build(shares[0], postings.Postings, TierStore)
    for pid in children:
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if status != 0 and code == 0:  # a share that failed (or was killed: status < 0)
            code = status if status > 0 else 1
    return code


def _shares(pairs: Sequence[str]) -> list[list[tuple[str, str]]]:
    """``[SPLIT] PATH NAME ...`` -> the (path, name) pairs of each share; ``SPLIT``
    (``--split=2,1``: tiers per share) is absent for one share."""
    counts: list[int] = []
    if pairs and pairs[0].startswith(_SPLIT):
        counts = [int(c) for c in pairs[0][len(_SPLIT):].split(",")]
        pairs = pairs[1:]
    jobs = list(zip(pairs[0::2], pairs[1::2]))
    if not counts:
        return [jobs]
    out, start = [], 0
    for c in counts:
        out.append(jobs[start:start + c])
        start += c
    return [s for s in out if s]


def _preload() -> None:
    """What every share's build imports, imported once before the shares are forked
    (scikit-learn ~0.7 s and tiervault ~0.4 s of CPU a process: bench/README.md): the
    stop words (scikit-learn's feature extraction, also TF-IDF) and the latent SVD's
    functions (vault/latent.py: ``sklearn.utils.extmath``, which the feature extraction
    has imported already; not ``sklearn.decomposition``, ~0.13 s more)."""
    from tiervault.vault.tokenizer import STOP_WORDS

    STOP_WORDS.get()
    import sklearn.feature_extraction.text  # noqa: F401  (vault/tfidf_rows.py's TfidfTransformer)
    import sklearn.utils.extmath  # noqa: F401  (vault/latent.py's randomized_svd)


def _build(share: Sequence[tuple[str, str]], postings_class: Any, store_class: Any) -> int:
    """Build and save the mirror of each tier of ``share`` in turn (not its link graph:
    the searching process builds those meanwhile, :func:`build_missing`); one JSON line
    each."""
    for path, name in share:
        t0, c0 = time.perf_counter(), time.process_time()
        with store_class(path, name=name) as store:
            rows = postings_class.build(store).base_rows
        # one write per line: the forked shares share this stdout (and print() writes the
        # text and its newline apart when Python runs unbuffered, PYTHONUNBUFFERED=1)
        sys.stdout.write(json.dumps({"name": name, "rows": rows, "wall_s": round(time.perf_counter() - t0, 3),
                                     "cpu_s": round(time.process_time() - c0, 3)}) + "\n")
        sys.stdout.flush()
    return 0

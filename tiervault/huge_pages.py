"""The long-lived commands (``serve``, ``mcp``) restart themselves once with memory on 2 MiB pages.

Here, not in :mod:`tiervault.cli`, because the vault needs the way back too: worker processes
(vault/mirror_workers.py) get the environment without what the restart added
(:func:`restart_undone`).

Why: a search touches thousands of 4 KiB pages of Python objects and NumPy arrays; in a
server the caches and the TLB are cold when a request arrives, and on a virtual machine
(nested paging) every TLB miss walks two page tables. The same process with glibc's heap
under ``MADV_HUGEPAGE`` (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``, glibc >= 2.35) and
Python's objects in that heap (``PYTHONMALLOC=malloc``) answered a 100K FTS-only scan
0.5-0.9 ms faster (bench/README.md, "session 13: the scan's cold-cache penalty" and
"session 15: the FTS-only scan at 100K"). Both settings are read once, when the process
starts (glibc its tunables, Python its allocator), so the command re-executes itself
(``os.execve``: same pid, same open stdin / stdout / stderr -- the MCP stdio transport is
untouched, nothing has been read or written yet) with them added.

Never when: ``TIERVAULT_HUGE_PAGES`` is ``0`` / ``off`` / ``no`` / ``false`` (the opt-out);
the process is already the re-executed one (``TIERVAULT_HUGE_PAGES_REEXEC`` set: never
twice); not Linux, not glibc >= 2.35, transparent huge pages ``never`` (no gain there);
the library is called in process (``main(argv)`` with an explicit argv). A value the user
set is kept: an existing ``glibc.malloc.hugetlb`` tunable or ``PYTHONMALLOC`` wins, other
tunables stay; nothing to add means no re-exec. The marker's value names the variables the
restart set or appended to (``GLIBC_TUNABLES,PYTHONMALLOC``): child processes inherit the
environment, and :func:`restart_undone` takes those additions back out for the ones that must
not have them (a mirror build's workers: +17 % CPU at 1M on huge pages, bench/README.md
session 15; session 14 found the build's large temporary arrays cost more on fresh 2 MiB pages).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence

__all__ = ["OPT_OUT", "MARKER", "LONG_LIVED", "huge_pages_env", "restart_undone", "tunable_names", "tunables_with",
           "long_lived_command", "reexec_on_huge_pages", "note_reexec", "thp_mode", "glibc_version"]

log = logging.getLogger(__name__)

OPT_OUT = "TIERVAULT_HUGE_PAGES"
MARKER = "TIERVAULT_HUGE_PAGES_REEXEC"
LONG_LIVED = frozenset({"serve", "mcp"})
TUNABLE = "glibc.malloc.hugetlb"
_OFF = {"0", "off", "no", "false"}
_THP = "/sys/kernel/mm/transparent_hugepage/enabled"
_MIN_GLIBC = (2, 35)  # the first glibc with glibc.malloc.hugetlb


def thp_mode(path: str = _THP) -> str | None:
    """The kernel's transparent huge page mode (``always`` / ``madvise`` / ``never``), or None
    when the file is absent (not Linux, or a kernel without THP)."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


def glibc_version() -> tuple[int, int] | None:
    """glibc's (major, minor), or None for another C library (musl, macOS, Windows)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        return None
    if not text or not text.startswith("glibc "):
        return None
    try:
        major, minor = text.split()[1].split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def tunable_names(value: str) -> set[str]:
    """The tunables a ``GLIBC_TUNABLES`` value (``name=value:name=value``) sets."""
    return {t.split("=", 1)[0] for t in value.split(":") if t}


def tunables_with(value: str, wanted: Sequence[str]) -> str:
    """``value`` with each ``name=value`` of ``wanted`` appended whose name it does not
    set already (the user's own settings win; the mirror workers' heap settings and the
    servers' huge-page restart both add theirs this way)."""
    names = tunable_names(value)
    return ":".join([t for t in value.split(":") if t] + [t for t in wanted if t.split("=", 1)[0] not in names])


def huge_pages_env(environ: Mapping[str, str], *, platform: str,
                   glibc: tuple[int, int] | None, thp: str | None) -> dict[str, str] | None:
    """The environment to re-execute with, or None to go on as is (see the module docstring)."""
    if environ.get(OPT_OUT, "").strip().lower() in _OFF or environ.get(MARKER):
        return None
    if not platform.startswith("linux") or glibc is None or glibc < _MIN_GLIBC:
        return None
    if thp not in ("always", "madvise"):
        return None
    env = dict(environ)
    added = []
    tunables = env.get("GLIBC_TUNABLES", "")
    if TUNABLE not in tunable_names(tunables):
        env["GLIBC_TUNABLES"] = tunables_with(tunables, [f"{TUNABLE}=1"])
        added.append("GLIBC_TUNABLES")
    if "PYTHONMALLOC" not in env:
        env["PYTHONMALLOC"] = "malloc"
        added.append("PYTHONMALLOC")
    if not added:
        return None  # the user set both already: nothing to add
    env[MARKER] = ",".join(added)
    return env


def restart_undone(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without what the restart added (the marker names it): our tunable out of
    ``GLIBC_TUNABLES`` (the user's others stay), our ``PYTHONMALLOC``, the marker. An
    environment without the marker comes back as it is (a user's own settings are theirs)."""
    env = dict(environ)
    added = env.pop(MARKER, "").split(",")
    if "PYTHONMALLOC" in added:
        env.pop("PYTHONMALLOC", None)
    if "GLIBC_TUNABLES" in added and "GLIBC_TUNABLES" in env:
        rest = [t for t in env["GLIBC_TUNABLES"].split(":") if t and t != f"{TUNABLE}=1"]
        if rest:
            env["GLIBC_TUNABLES"] = ":".join(rest)
        else:
            del env["GLIBC_TUNABLES"]
    return env


def long_lived_command(argv: Sequence[str]) -> str | None:
    """The subcommand of a raw command line when it is ``serve`` or ``mcp``, read before the
    parser is built (building it imports every command module: ~0.5 s a start here). Global
    options may precede it; ``--help`` / ``--version`` anywhere mean no server starts."""
    args = list(argv)
    if any(a in ("-h", "--help", "--version") for a in args):
        return None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--config":
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return a if a in LONG_LIVED else None
    return None


def reexec_on_huge_pages(argv: Sequence[str]) -> None:
    """Re-execute this process once on huge pages when ``argv`` starts a long-lived command
    and the machine supports it; returns (without doing anything) otherwise."""
    if long_lived_command(argv) is None:
        return
    env = huge_pages_env(os.environ, platform=sys.platform, glibc=glibc_version(),
                         thp=thp_mode())
    orig = getattr(sys, "orig_argv", None)
    if env is None or not sys.executable or not orig:
        return
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    try:
        os.execve(sys.executable, [sys.executable, *orig[1:]], env)
    except OSError as exc:  # the interpreter cannot be run again: go on on 4 KiB pages
        log.warning("could not restart on 2 MiB pages (%s); set %s=0 to skip the attempt",
                    exc, OPT_OUT)


def note_reexec() -> None:
    """Log (info: seen with -v) that this process is the re-executed one, naming the opt-out."""
    if os.environ.get(MARKER):
        log.info("restarted once with memory on 2 MiB pages (GLIBC_TUNABLES=%s, PYTHONMALLOC=%s);"
                  " %s=0 turns this off", os.environ.get("GLIBC_TUNABLES", ""),
                  os.environ.get("PYTHONMALLOC", ""), OPT_OUT)

"""A tier as a folder of Markdown files, both ways (``export-md`` / ``import-md``).

Which files are considered (:func:`scan_folder`), recursively:

* ``*.md`` in any letter case (``b.MD`` too) is a *candidate* and is read;
* ``README.md`` / ``index.md`` (any case) are the folder's own documentation:
  ignored, and never a name the exporter writes (see :func:`markdown.file_name`);
* a ``.md`` file that is hidden or inside a hidden folder, a dangling symlink,
  anything that is not a regular file, or a file over ``MAX_FILE_BYTES`` is a
  *skipped* candidate: reported as a problem, never read; so is a linked folder
  (not entered: links may loop).

Import. Every file is compared with the stored entry and only what changed is
written. ``prune`` (delete entries with no file) runs only when every candidate
was read without error -- a skipped or unreadable file might be the very entry
that looks orphaned -- and, when the folder holds no entry file at all, only with
``force`` (an empty folder must not empty the tier). The prune is one transaction.

Export. Existing files are matched to entries by the ``id`` inside them, not by
their name: a hand-named ``Deploy-Guide.md`` holding ``id: deploy-guide`` is
updated in place. A file this module did not write (no front matter, or front
matter it cannot read) is never overwritten: the entry is reported as a conflict
and left unwritten. ``stale`` lists only files with readable front matter naming
no entry of the tier, and only those are deleted by ``prune``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from tiervault.errors import TierVaultError, ValidationError
from tiervault.vault.atomic_file import atomic_write
from tiervault.vault.entry import Entry
from tiervault.vault.jsonl import LinkSpec
from tiervault.vault.markdown import IGNORED_NAMES, MAX_FILE_BYTES, ParsedFile, file_name, parse, render

__all__ = ["ExportReport", "ImportReport", "FolderScan", "scan_folder", "read_folder",
           "export_folder", "import_folder"]

_BATCH = 1_000


@dataclass(slots=True)
class FolderScan:
    """The files of a folder: candidates to read, skipped ones (with why), ignored docs."""

    root: Path
    candidates: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)


def scan_folder(directory: str | Path) -> FolderScan:
    """Classify every ``*.md`` under ``directory`` (see the module docstring)."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ValidationError("directory", f"{root} is not a directory")
    scan = FolderScan(root)

    def failed(exc: OSError) -> None:
        scan.skipped.append(f"{exc.filename}: cannot list the folder: {exc.strerror}")

    for folder, dirs, files in os.walk(root, onerror=failed):
        dirs.sort()
        base = Path(folder)
        for name in [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            # os.walk does not enter linked folders (they may loop): say so, since
            # entry files in there would otherwise look orphaned to a prune.
            rel = (base / name).relative_to(root)
            if not any(p.startswith(".") for p in rel.parts):
                scan.skipped.append(f"{rel}: a linked folder, not read (copy it in or "
                                    "import it on its own)")
        for name in sorted(files):
            if not name.lower().endswith(".md"):
                continue
            path = base / name
            rel = path.relative_to(root)
            if name.lower() in IGNORED_NAMES and not any(p.startswith(".") for p in rel.parts):
                scan.ignored.append(path)
                continue
            if any(part.startswith(".") for part in rel.parts):
                scan.skipped.append(f"{rel}: hidden, not read (move it out of the hidden "
                                    "folder or rename it)")
                continue
            try:
                info = path.stat()
            except OSError as exc:
                scan.skipped.append(f"{rel}: cannot be read: {exc.strerror} (a dangling link?)")
                continue
            if not stat.S_ISREG(info.st_mode):
                scan.skipped.append(f"{rel}: not a regular file, not read")
            elif info.st_size > MAX_FILE_BYTES:
                scan.skipped.append(f"{rel}: {info.st_size} bytes, over the limit of "
                                    f"{MAX_FILE_BYTES} for one entry file")
            else:
                scan.candidates.append(path)
    return scan


def read_folder(scan: FolderScan, on_progress: Callable[[int], None] | None = None) -> list[ParsedFile]:
    """Parse every candidate of ``scan``. Files sharing an id are all errors: which
    one is meant cannot be guessed."""
    root = scan.root
    parsed: list[ParsedFile] = []
    for n, path in enumerate(scan.candidates, start=1):
        shown = path.relative_to(root)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            parsed.append(ParsedFile(shown, error=f"{shown}: not UTF-8 text (byte {exc.start})"))
        except OSError as exc:
            parsed.append(ParsedFile(shown, error=f"{shown}: cannot read: {exc.strerror}"))
        else:
            parsed.append(parse(text, shown))
        if on_progress and n % 100 == 0:
            on_progress(n)
    holders: dict[str, list[Path]] = {}
    for item in parsed:
        if item.entry is not None:
            holders.setdefault(item.entry.id, []).append(item.path)
    for i, item in enumerate(parsed):
        if item.entry is not None and len(holders[item.entry.id]) > 1:
            others = ", ".join(str(p) for p in holders[item.entry.id] if p != item.path)
            parsed[i] = replace(item, entry=None, links=(),
                                error=f"{item.path}: id {item.entry.id!r} is also used by "
                                      f"{others}; ids must be unique")
    if on_progress:
        on_progress(len(parsed))
    return parsed


# -- export -----------------------------------------------------------------------------------
@dataclass(slots=True)
class ExportReport:
    """What an export did: files written / identical, stale and pruned files, and
    entries not written because their file is not ours (``conflicts``)."""

    written: int = 0
    unchanged: int = 0
    stale: list[str] = field(default_factory=list)
    pruned: int = 0
    conflicts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"written": self.written, "unchanged": self.unchanged, "stale": self.stale,
                "pruned": self.pruned, "conflicts": self.conflicts}


def _chunks(items: Sequence[Any], size: int = _BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _outgoing(store: Any, ids: Sequence[str]) -> dict[str, list[Any]]:
    wanted = set(ids)
    out: dict[str, list[Any]] = {i: [] for i in ids}
    for link in store.links_touching(list(ids)):
        if link.source_id in wanted:
            out[link.source_id].append(link)
    return out


def _write_if_changed(path: Path, text: str) -> bool:
    """Write atomically unless the file already holds ``text``; True when written."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):  # no file yet, or not ours to compare: write
        pass
    with atomic_write(path) as fh:
        fh.write(text)
    return True


def export_folder(manager: Any, tier: str, directory: str | Path, *, prune: bool = False,
                  on_progress: Callable[[int], None] | None = None) -> ExportReport:
    """Write every entry of ``tier`` into ``directory`` (only files that differ).

    Files are matched by the id inside them (see the module docstring).
    """
    store = manager.store(tier)
    target = Path(directory).expanduser()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError("directory", f"cannot use {target}: {exc.strerror}") from exc
    scan = scan_folder(target)
    ours: dict[str, Path] = {}  # id -> the file holding it (others are never overwritten)
    for item in read_folder(scan):
        if item.entry is not None and item.front_matter:
            ours.setdefault(item.entry.id, target / item.path)
    report = ExportReport()
    ids: set[str] = set()
    batch: list[Entry] = []

    def flush() -> None:
        links = _outgoing(store, [e.id for e in batch])
        for entry in batch:
            path = ours.get(entry.id)
            if path is None:
                path = target / file_name(entry.id)
                # Anything already there is another entry's file or not ours at all.
                free = not os.path.lexists(path)
            else:
                free = True
            if free:
                if _write_if_changed(path, render(entry, links[entry.id])):
                    report.written += 1
                else:
                    report.unchanged += 1
            else:
                report.conflicts.append(f"{path.relative_to(target)}: not written for entry "
                                        f"{entry.id!r}: the file exists and is not this entry's "
                                        "(rename or move it, then export again)")
        batch.clear()
        if on_progress:
            on_progress(len(ids))

    for entry in store.iter_entries():
        ids.add(entry.id)
        batch.append(entry)
        if len(batch) >= _BATCH:
            flush()
    if batch:
        flush()
    for eid, path in sorted(ours.items()):
        if eid not in ids:
            report.stale.append(str(path.relative_to(target)))
            if prune:
                try:
                    path.unlink()
                except OSError as exc:
                    raise ValidationError("directory", f"cannot delete {path}: {exc.strerror}") from exc
                report.pruned += 1
    return report


# -- import -----------------------------------------------------------------------------------
@dataclass(slots=True)
class ImportReport:
    """What an import did, by entry; ``errors`` name the file (and line)."""

    files: int = 0
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    pruned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    prune_skipped: str | None = None  # why --prune did not run

    def as_dict(self) -> dict[str, Any]:
        return {"files": self.files, "added": len(self.added), "updated": len(self.updated),
                "unchanged": self.unchanged, "pruned": len(self.pruned),
                "addedIds": self.added, "updatedIds": self.updated, "prunedIds": self.pruned,
                "errors": self.errors, "pruneSkipped": self.prune_skipped is not None,
                "pruneSkippedReason": self.prune_skipped}


def _compare_key(entry: Entry, links: Iterable[Any], stored: Entry | None = None) -> tuple:
    data = entry.to_dict()
    data.pop("updated_at")
    data.pop("content_hash")
    if data["created_at"] is None and stored is not None:
        data["created_at"] = stored.to_dict()["created_at"]  # absent in the file: keep stored
    specs = sorted((s.target, s.type, s.note) for s in map(_spec, links))
    return tuple(sorted((k, str(v)) for k, v in data.items())), tuple(specs)


def _spec(link: Any) -> LinkSpec:
    if isinstance(link, LinkSpec):
        return link
    return LinkSpec(link.target_id, link.link_type, link.note or "")


def import_folder(manager: Any, tier: str, directory: str | Path, *, prune: bool = False,
                  force: bool = False,
                  on_progress: Callable[[int], None] | None = None) -> ImportReport:
    """Bring ``tier`` in line with the folder: add new entries, update changed ones (and
    their outgoing links), leave the rest; with ``prune`` delete entries that have no
    file (see the module docstring for when prune refuses to run)."""
    store = manager.store(tier)
    scan = scan_folder(directory)
    parsed = read_folder(scan, on_progress)
    report = ImportReport(files=len(parsed))
    report.errors = [*scan.skipped, *(p.error for p in parsed if p.error)]
    unread = len(report.errors)
    good = [p for p in parsed if p.entry is not None]
    to_write: list[Entry] = []
    link_plan: list[tuple[str, tuple[LinkSpec, ...], list[Any]]] = []
    for chunk in _chunks(good):
        ids = [p.entry.id for p in chunk]  # type: ignore[union-attr]
        stored = store.get_many(ids)
        stored_links = _outgoing(store, ids)
        for p in chunk:
            entry = p.entry
            assert entry is not None
            old = stored.get(entry.id)
            old_links = stored_links.get(entry.id, [])
            if old is None:
                to_write.append(entry)
                report.added.append(entry.id)
                link_plan.append((entry.id, p.links, []))
                continue
            new_key, old_key = _compare_key(entry, p.links, old), _compare_key(old, old_links)
            if new_key == old_key:
                report.unchanged += 1
                continue
            report.updated.append(entry.id)
            if new_key[0] != old_key[0]:
                # The file's updated_at counts only when it was moved forward by hand;
                # the one the export wrote (equal to the stored one) means "now".
                later = (entry.updated_at is not None and old.updated_at is not None
                         and entry.updated_at > old.updated_at)
                to_write.append(entry if later else replace(entry, updated_at=None))
            if new_key[1] != old_key[1]:
                link_plan.append((entry.id, p.links, old_links))
    if to_write:
        manager.capture_many(to_write, tier)  # through the manager: write hooks (embeddings) run
    for source, links, old_links in link_plan:
        wanted = {(s.target, s.type): s for s in links}
        for old in old_links:
            if (old.target_id, old.link_type) not in wanted:
                store.unlink(source, old.target_id, old.link_type)
        have = {(l.target_id, l.link_type): l.note for l in old_links}
        for key, spec in wanted.items():
            if have.get(key) == spec.note:
                continue
            try:
                manager.link(source, spec.target, spec.type, spec.note, tier=tier)
            except (TierVaultError, LookupError) as exc:
                report.errors.append(f"{source}: link to {spec.target!r} ({spec.type}) not "
                                     f"stored: {exc}")
    if prune:
        if unread:
            report.prune_skipped = (f"{unread} file(s) could not be read or were skipped; "
                                    "an entry among them would look orphaned")
        elif not good and not force:
            report.prune_skipped = ("the folder holds no entry file; pruning would empty the "
                                    "tier (use --force if that is what you want)")
        else:
            keep = {p.entry.id for p in good}  # type: ignore[union-attr]
            orphans = [e.id for e in store.iter_entries() if e.id not in keep]
            store.delete_many(orphans)
            report.pruned = orphans
    return report

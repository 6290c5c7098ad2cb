"""Access tokens of the team server: created once, stored only as a hash.

A token reads ``tv_<key>_<secret>``: ``key`` (10 hex characters) names the
record and is safe to show (``token list``, logs); ``secret`` (43 URL-safe
characters, 256 bits) is shown once by ``token create`` and never stored. The
store keeps ``sha256(token)`` and compares with :func:`hmac.compare_digest`, so
neither the file nor the timing of a check reveals a usable token.

The store is one JSON file, owner-only (0600), next to the server's config
(``<state dir>/tokens.json``); every change is written to a temporary file in
the same directory and renamed over the old one (atomic on POSIX), so a crash
leaves the old or the new file, never half of one. A running server re-reads
the file when its modification time or size changes: ``token revoke`` takes
effect on the next request without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tiervault.errors import ConfigError, ValidationError
from tiervault.server.principal import RIGHTS, Principal

__all__ = ["TokenStore", "TokenRecord", "TokenRejected", "parse_allow", "parse_duration",
           "AGENT_ID", "TIERS"]

#: Agent ids name agent-tier files: a conservative slug, never a path.
AGENT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
#: Tiers a token may name: the built-in ones (sources are read through the server's config).
TIERS = ("agent", "project", "team")
_TOKEN = re.compile(r"tv_([0-9a-f]{10})_([A-Za-z0-9_-]{43})")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


class TokenRejected(Exception):
    """A presented token is unknown, malformed, expired or revoked (``reason`` says which)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """One token as stored: everything but the secret."""

    key: str
    agent: str
    rights: dict[str, str]
    digest: str
    created: float
    expires: float | None = None
    revoked: float | None = None
    note: str = ""

    def public(self) -> dict[str, Any]:
        """What ``token list`` shows: no digest."""
        out = asdict(self)
        del out["digest"]
        out["status"] = self.status(time.time())
        return out

    def status(self, now: float) -> str:
        if self.revoked is not None:
            return "revoked"
        if self.expires is not None and self.expires <= now:
            return "expired"
        return "active"


def parse_allow(text: str) -> dict[str, str]:
    """``"team:rw,project:r"`` -> ``{"team": "rw", "project": "r", "agent": "rw"}``.

    The agent's own tier is read-write unless the list names ``agent`` itself.
    """
    rights: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        tier, _, right = part.partition(":")
        tier, right = tier.strip(), right.strip() or "r"
        if tier not in TIERS:
            raise ValidationError("allow", f"unknown tier {tier!r} in {part!r}; tiers: "
                                           f"{', '.join(TIERS)} (e.g. --allow team:rw,project:r)")
        if right not in RIGHTS:
            raise ValidationError("allow", f"right {right!r} in {part!r} is not one of "
                                           f"{', '.join(RIGHTS)}")
        rights[tier] = right
    rights.setdefault("agent", "rw")
    return rights


def parse_duration(text: str) -> float:
    """``"90d"``, ``"12h"``, ``"30m"``, ``"2w"``, ``"1y"`` -> seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhdwy])\s*", text or "")
    if not m or int(m.group(1)) <= 0:
        raise ValidationError("expires", f"{text!r} is not a duration; use a number and a unit "
                                         "s/m/h/d/w/y, e.g. 90d")
    return int(m.group(1)) * _UNITS[m.group(2)]


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    """The token file: create, list, revoke, and check a presented token."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._records: dict[str, TokenRecord] = {}

    # -- file -------------------------------------------------------------------------
    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def _load(self) -> dict[str, TokenRecord]:
        """The records, re-read only when the file changed since the last read."""
        stamp = self._stamp()
        if stamp == self._seen and (stamp is not None or not self._records):
            return self._records
        records: dict[str, TokenRecord] = {}
        if stamp is not None:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                for item in data.get("tokens", []):
                    rec = TokenRecord(**item)
                    records[rec.key] = rec
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                raise ConfigError(f"token file is unreadable or damaged ({type(exc).__name__}); "
                                  "restore it or move it away and create tokens again",
                                  file=str(self.path)) from exc
        self._records, self._seen = records, stamp
        return records

    def _save(self, records: dict[str, TokenRecord]) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        body = json.dumps({"version": 1, "tokens": [asdict(r) for r in records.values()]},
                          indent=1, sort_keys=True)
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", suffix=".tmp", dir=directory)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._records, self._seen = dict(records), self._stamp()

    # -- commands ---------------------------------------------------------------------
    def create(self, agent: str, rights: dict[str, str], *, expires_in: float | None = None,
               note: str = "") -> tuple[str, TokenRecord]:
        """A new token for ``agent``: returns (the token, shown once; its record)."""
        if not isinstance(agent, str) or not AGENT_ID.fullmatch(agent):
            raise ValidationError("agent", f"{agent!r} is not an agent id: 1-64 of lowercase "
                                           "letters, digits, '_' and '-', starting with a letter "
                                           "or digit")
        principal = Principal(agent, rights)  # validates the rights
        with self._lock:
            records = dict(self._load())
            key = secrets.token_hex(5)
            while key in records:
                key = secrets.token_hex(5)
            token = f"tv_{key}_{secrets.token_urlsafe(32)}"
            now = time.time()
            rec = TokenRecord(key=key, agent=agent, rights=dict(principal.rights),
                              digest=_digest(token), created=now,
                              expires=now + expires_in if expires_in else None, note=note)
            records[key] = rec
            self._save(records)
        return token, rec

    def records(self) -> list[TokenRecord]:
        """Every token record, oldest first."""
        with self._lock:
            return sorted(self._load().values(), key=lambda r: r.created)

    def revoke(self, key_or_token: str) -> TokenRecord:
        """Revoke by key (``token list``) or by the token itself."""
        m = _TOKEN.fullmatch(key_or_token.strip())
        key = m.group(1) if m else key_or_token.strip()
        with self._lock:
            records = dict(self._load())
            rec = records.get(key)
            if rec is None:
                # Never echo the input whole: a mistyped secret token must not reach a log.
                shown = key if m else f"{key[:6]}..."
                raise ValidationError("key", f"no token with key {shown!r}; `tiervault token list` "
                                             "shows the keys")
            if rec.revoked is None:
                rec = TokenRecord(**{**asdict(rec), "revoked": time.time()})
                records[key] = rec
                self._save(records)
        return rec

    def active_count(self) -> int:
        now = time.time()
        with self._lock:
            return sum(1 for r in self._load().values() if r.status(now) == "active")

    # -- checking ---------------------------------------------------------------------
    def check(self, token: str) -> tuple[Principal, str]:
        """(principal, key) for a valid token; TokenRejected otherwise (never echoing it)."""
        m = _TOKEN.fullmatch(token or "")
        # Hash even for a malformed token so every rejection costs about the same.
        presented = _digest(token or "")
        if not m:
            raise TokenRejected("malformed token; expected 'Authorization: Bearer tv_...'")
        with self._lock:
            rec = self._load().get(m.group(1))
        if rec is None or not hmac.compare_digest(presented, rec.digest):
            raise TokenRejected("unknown token; ask the server's operator for a token "
                                "(`tiervault token create`)")
        status = rec.status(time.time())
        if status != "active":
            raise TokenRejected(f"token {rec.key} is {status}; ask for a new one")
        return Principal(rec.agent, rec.rights), rec.key

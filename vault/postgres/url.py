"""A PostgreSQL tier's address: ``${ENV}`` expansion, validation and a password-free display form.

The password may come from the URL itself, from ``${VAR}`` inside the URL, or
from libpq's own sources (``PGPASSWORD``, ``~/.pgpass``, ``PGSSLMODE``...),
which psycopg reads when the URL has none. Whatever its source, the password
never leaves this module in a printable form: :attr:`PgAddress.display` (used
in ``repr``, errors, logs, stats and MCP) has no password, and
:func:`scrub` removes it from any driver message that might echo it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from tiervault.errors import ConfigError

__all__ = ["PgAddress", "parse_address", "scrub", "DEFAULT_SCHEMA"]

DEFAULT_SCHEMA = "tiervault"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class PgAddress:
    """Where a tier lives: a libpq URL (secret) and the schema holding its tables."""

    dsn: str = field(repr=False)  # may hold a password: never printed
    schema: str
    display: str  # postgresql://user@host:port/db (schema s): no password
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        return f"PgAddress({self.display!r})"

    __str__ = __repr__


def _expand(url: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """Replace ``${VAR}`` with its value; returns (url, values substituted)."""
    values: list[str] = []

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        value = env.get(name)
        if value is None or value == "":
            raise ConfigError(f"the tier URL refers to ${{{name}}}, which is not set; export "
                              f"{name} (the password is read from it, never written to the config)",
                              key="url")
        values.append(value)
        # A value substituted into the userinfo must not break the URL's syntax.
        return quote(value, safe="")

    return _ENV_REF.sub(sub, url), values


def parse_address(url: str, schema: str | None = None, *,
                  env: Mapping[str, str] | None = None) -> PgAddress:
    """Validate a ``postgresql://`` URL and schema name; expand ``${ENV}`` references."""
    if not isinstance(url, str) or not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("a PostgreSQL tier URL must start with postgresql:// "
                          "(postgresql://user@host:5432/dbname)", key="url")
    schema = DEFAULT_SCHEMA if schema in (None, "") else schema
    if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
        raise ConfigError(f"schema {str(schema)[:70]!r} is not a plain lowercase SQL name "
                          "(letters, digits, underscore; at most 63 characters)", key="schema")
    dsn, values = _expand(url, os.environ if env is None else env)
    try:
        parts = urlsplit(dsn)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"the tier URL is malformed ({_strip(str(exc), values)}); expected "
                          "postgresql://user@host:5432/dbname", key="url") from None
    secrets = [v for v in values if v]
    if parts.password:
        secrets.append(unquote(parts.password))
        secrets.append(parts.password)
    host = parts.hostname or "localhost"
    user = unquote(parts.username) + "@" if parts.username else ""
    netloc = f"{user}{host}" + (f":{port}" if port else "")
    shown = urlunsplit(("postgresql", netloc, parts.path, "", ""))
    _KNOWN_SECRETS.update(s for s in secrets if len(s) >= 3)
    return PgAddress(dsn=dsn, schema=schema, display=f"{shown} (schema {schema})",
                     secrets=tuple(sorted(set(secrets), key=len, reverse=True)))


def _strip(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


#: Every password seen by :func:`parse_address` in this process (scrubbed from messages).
_KNOWN_SECRETS: set[str] = set()


def scrub(text: str) -> str:
    """``text`` with every known password (and ``$PGPASSWORD``) replaced by ``***``."""
    text = _strip(text, sorted(_KNOWN_SECRETS, key=len, reverse=True))
    pgpassword = os.environ.get("PGPASSWORD")
    if pgpassword:
        text = text.replace(pgpassword, "***")
    return text

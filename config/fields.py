"""Field checks shared by the YAML, environment and override layers of the loader.

Each check returns the validated value or raises a ConfigError through an
:class:`Origin`, which knows how to name the place the value came from (file and
line, environment variable, or override). Checks never echo secret values.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from tiervault.config.settings import Secret
from tiervault.errors import ConfigError

_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class Origin:
    """Where a layer of values comes from, so that an error can say where to look."""

    def __init__(self, kind: str, base_dir: Path, file: Path | None = None,
                 lines: Mapping[str, int] | None = None) -> None:
        self.kind, self.base_dir, self.file, self.lines = kind, base_dir, file, lines or {}

    def name(self, yaml_key: str, flat_key: str) -> str:
        return yaml_key if self.kind == "yaml" else flat_key

    def fail(self, key: str, message: str) -> NoReturn:
        if self.kind == "yaml":
            raise ConfigError(f"{key or '(top level)'}: {message}", file=str(self.file),
                              line=self._line(key), key=key or None)
        shown = f"TIERVAULT_{key.upper()}" if self.kind == "env" else key
        label = {"env": "environment variable", "override": "override"}.get(self.kind, "argument")
        raise ConfigError(f"{label} {shown}: {message}", key=shown)

    def _line(self, key: str) -> int | None:
        # A missing key (a required field) is reported at its parent's line.
        while key and key not in self.lines:
            key = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", key) if re.search(r"[.\[]", key) else ""
        return self.lines.get(key)


def hint(word: str, known: tuple[str, ...]) -> str:
    """`` Did you mean 'x'?`` for the closest known word, or an empty string."""
    close = difflib.get_close_matches(word, known, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def sub(parent: Mapping[str, Any], key: str, default: Any) -> Any:
    """``parent[key]``, with an absent or null value meaning ``default``."""
    value = parent.get(key)
    return default if value is None else value


def join(prefix: str, key: object) -> str:
    """Key path of ``key`` under ``prefix``: ``embedding`` + ``model`` -> ``embedding.model``."""
    return f"{prefix}.{key}" if prefix else str(key)


def type_name(value: object) -> str:
    """What a value is, for messages; never the value itself (it may be a secret)."""
    names = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number",
             str: "a string", list: "a list", dict: "a mapping"}
    return names.get(type(value), type(value).__name__)


def mapping(o: Origin, key: str, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    """A mapping whose keys are all in ``allowed``; unknown keys get a suggestion."""
    if not isinstance(value, dict):
        o.fail(key, f"expected a mapping with keys {', '.join(allowed)}; got {type_name(value)}")
    for k in value:
        if not isinstance(k, str):
            o.fail(key, f"keys must be strings, got {type_name(k)}. Allowed keys: {', '.join(allowed)}.")
        if k not in allowed:
            o.fail(join(key, k), f"unknown key {k!r}. Allowed keys: {', '.join(allowed)}."
                                 f"{hint(k, allowed)}")
    return value


def text(o: Origin, key: str, value: Any, choices: tuple[str, ...] = ()) -> str:
    """A non-empty string (stripped), one of ``choices`` when given."""
    if choices and value not in choices:
        got = repr(value) if isinstance(value, str) else type_name(value)
        o.fail(key, f"must be one of {', '.join(choices)}; got {got}")
    if not isinstance(value, str) or not value.strip():
        got = "an empty string" if value == "" else type_name(value)
        o.fail(key, f"expected a non-empty string, got {got}")
    return value.strip()


def slug(o: Origin, key: str, value: Any) -> str:
    word = text(o, key, value)
    if not _SLUG.fullmatch(word):
        o.fail(key, f"{word!r} is not a slug: 1-64 of lowercase letters, digits, '.', '_', '-', "
                    "starting with a letter or digit")
    return word


def integer(o: Origin, key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        o.fail(key, f"expected an integer >= {minimum}, got {type_name(value)}")
    if value < minimum:
        o.fail(key, f"must be an integer >= {minimum}; got {value}")
    return value


def number(o: Origin, key: str, value: Any, *, positive: bool) -> float:
    what = "a number > 0" if positive else "a number >= 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        o.fail(key, f"expected {what}, got {type_name(value)}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        o.fail(key, f"must be {what}; got {value}")
    return float(value)


def boolean(o: Origin, key: str, value: Any) -> bool:
    if isinstance(value, str) and o.kind != "yaml":  # env values are always text
        if value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        o.fail(key, f"expected one of {', '.join(_TRUE + _FALSE)}; got {value!r}")
    if not isinstance(value, bool):
        o.fail(key, f"expected true or false, got {type_name(value)}")
    return value


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def path(o: Origin, key: str, value: Any, env: Mapping[str, str]) -> Path:
    """Expand ``${VAR}`` (from ``env``) and ``~``; resolve relative to the origin's base."""
    if isinstance(value, Path):
        value = str(value)
    raw = text(o, key, value)

    def substitute(match: re.Match[str]) -> str:
        if match.group(1) not in env:
            o.fail(key, f"refers to ${{{match.group(1)}}}, which is not set in the environment")
        return env[match.group(1)]

    raw = _ENV_REF.sub(substitute, raw)
    if raw == "~" or raw.startswith("~/"):
        raw = str(home(env)) + raw[1:]  # HOME of ``env``, so a test or a caller can pin it
    p = Path(os.path.expanduser(raw))
    return Path(os.path.normpath(p if p.is_absolute() else o.base_dir / p))


def api_keys(o: Origin, key: str, value: Any) -> tuple[Secret, ...]:
    """A key or a list of keys -> pool. Errors name the type, never the value."""
    items = value if isinstance(value, list) else [value]
    if not items:
        o.fail(key, "expected a string or a non-empty list of strings, got an empty list")
    pool = []
    for i, item in enumerate(items):
        at = f"{key}[{i}]" if isinstance(value, list) else key
        if not isinstance(item, str) or not item.strip():
            got = "an empty string" if item == "" else type_name(item)
            o.fail(at, f"expected a string or a list of strings, got {got}")
        pool.append(Secret(item.strip()))
    return tuple(pool)


def url(o: Origin, key: str, value: Any) -> str:
    raw = text(o, key, value)
    if not raw.startswith(("http://", "https://")):
        # The value is not echoed: a URL may carry credentials (https://user:pass@host).
        o.fail(key, "must be an http:// or https:// URL")
    return raw.rstrip("/")


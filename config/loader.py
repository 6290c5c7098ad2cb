"""Load settings: defaults < agent.yaml < ``TIERVAULT_*`` environment < overrides.

The YAML file is composed to a node tree first so that every key path
(``embedding.batchSize``, ``sources[1].weight``) maps to its line; every error
is a :class:`~tiervault.errors.ConfigError` naming the file, the line, the key
and what is allowed. Secrets are never echoed: API-key errors name the type,
YAML syntax errors are reported without the source snippet.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import yaml

from tiervault.config import fields as chk
from tiervault.config.settings import (
    ADAPTATIONS,
    BRAIN_WEIGHT_KEYS,
    DEFAULT_EMBEDDING_MODELS,
    DEFAULT_TIER_WEIGHTS,
    EMBEDDING_PROVIDERS,
    FEATURE_EMBEDDING,
    FEEDBACK_POOLS,
    TIER_NAMES,
    BrainConfig,
    EmbeddingConfig,
    Secret,
    Settings,
    TierConfig,
)
from tiervault.errors import ConfigError

__all__ = ["load_settings", "resolve_config_path", "locate_config", "ConfigLocation",
           "write_default_config", "CONFIG_ENV_VAR", "FLAT_KEYS"]

CONFIG_ENV_VAR = "TIERVAULT_CONFIG"
DEFAULT_CONFIG_NAME = "agent.yaml"
TOP_KEYS = ("agent_id", "tiers", "tier_weights", "sources", "embedding", "features", "brain")
SOURCE_KEYS = ("name", "path", "weight")
#: A tier given as a mapping: ``team: {url: postgresql://u@host/db, schema: tiervault}``.
TIER_KEYS = ("path", "url", "schema", "token")
DEFAULT_SOURCE_WEIGHT = 0.5
EMBEDDING_KEYS = ("provider", "model", "apiKey", "baseUrl", "batchSize", "inputType", "dim",
                  "timeout", "maxInputChars", "modelPath")
BRAIN_KEYS = ("halfLifeDays", "feedbackThreshold", "weights", "smallCorpusGuard", "adaptation",
              "feedbackPool", "refitEvery")
FEATURES = (FEATURE_EMBEDDING,)
INPUT_TYPES = ("document", "query")
# Flat names shared by the environment (TIERVAULT_<NAME>) and CLI overrides; the
# order matters: the provider is applied before the model that refines it.
FLAT_KEYS = ("agent_id", "agent_tier", "project_tier", "team_tier", "embedding_provider",
             "embedding_model", "embedding_base_url", "embedding_enabled")
# Which environment variable supplies the key pool when the block has no apiKey.
KEY_ENV_VARS = {"openai": "OPENAI_API_KEY", "http": "OPENAI_API_KEY", "voyage": "VOYAGE_API_KEY"}


def _env_key_pool(env: Mapping[str, str], provider: str) -> tuple[Secret, ...]:
    raw = env.get(KEY_ENV_VARS.get(provider, ""), "")
    return tuple(Secret(k.strip()) for k in raw.split(",") if k.strip())


class _State:
    """The merged, validated values of the layers applied so far."""

    def __init__(self) -> None:
        self.agent_id: str | None = None
        self.tier_paths: dict[str, Path] = {}
        self.tier_servers: dict[str, dict[str, Any]] = {}  # tier -> {url, schema, token}
        self.tier_weights = dict(DEFAULT_TIER_WEIGHTS)
        self.sources: list[TierConfig] = []
        self.embedding: dict[str, Any] | None = None
        self.embedding_origin: chk.Origin | None = None
        self.features: set[str] = set()
        self.brain: dict[str, Any] = {}


def _apply_yaml(st: _State, data: Any, o: chk.Origin, env: Mapping[str, str]) -> None:
    if data is None:  # an empty (or comments-only) file is a mistake, not a config
        raise ConfigError("is empty; an agent.yaml needs at least `agent_id: NAME` and its "
                          "`tiers:` (write one with `tiervault init --force`, or use `{}` for "
                          "all defaults)", file=str(o.file))
    top = chk.mapping(o, "", data, TOP_KEYS)
    if top.get("agent_id") is not None:
        st.agent_id = chk.slug(o, "agent_id", top["agent_id"])
    for name, value in chk.mapping(o, "tiers", chk.sub(top, "tiers", {}), TIER_NAMES).items():
        if isinstance(value, dict):
            _apply_tier_mapping(st, name, chk.mapping(o, f"tiers.{name}", value, TIER_KEYS), o, env)
        elif value is not None:
            st.tier_paths[name] = chk.path(o, f"tiers.{name}", value, env)
            st.tier_servers.pop(name, None)
    for name, value in chk.mapping(o, "tier_weights", chk.sub(top, "tier_weights", {}), TIER_NAMES).items():
        st.tier_weights[name] = chk.number(o, f"tier_weights.{name}", value, positive=True)
    sources = chk.sub(top, "sources", [])
    if not isinstance(sources, list):
        o.fail("sources", f"expected a list of mappings with keys {', '.join(SOURCE_KEYS)}; "
                          f"got {chk.type_name(sources)}")
    for i, item in enumerate(sources):
        at = f"sources[{i}]"
        item = chk.mapping(o, at, item, SOURCE_KEYS)
        for required in ("name", "path"):
            if required not in item:
                o.fail(f"{at}.{required}", f"is required (a source needs {', '.join(SOURCE_KEYS[:2])})")
        name = chk.slug(o, f"{at}.name", item["name"])
        if name in TIER_NAMES or any(s.name == name for s in st.sources):
            taken = ", ".join([*TIER_NAMES, *(s.name for s in st.sources)])
            o.fail(f"{at}.name", f"{name!r} is already taken; names in use: {taken}")
        weight = item.get("weight", DEFAULT_SOURCE_WEIGHT)
        st.sources.append(TierConfig(name, chk.path(o, f"{at}.path", item["path"], env),
                                     chk.number(o, f"{at}.weight", weight, positive=True), True))
    if top.get("embedding") is not None:
        _apply_embedding_block(st, chk.mapping(o, "embedding", top["embedding"], EMBEDDING_KEYS), o, env)
    features = chk.sub(top, "features", {})
    if not isinstance(features, dict):
        o.fail("features", f"expected a mapping of flags to true/false, got "
                           f"{chk.type_name(features)}; write it as\n  features:\n"
                           f"    {FEATURE_EMBEDDING}: true")
    for name, value in chk.mapping(o, "features", features, FEATURES).items():
        (st.features.add if chk.boolean(o, f"features.{name}", value) else st.features.discard)(name)
    brain = chk.mapping(o, "brain", chk.sub(top, "brain", {}), BRAIN_KEYS)
    if "halfLifeDays" in brain:
        st.brain["half_life_days"] = chk.number(o, "brain.halfLifeDays", brain["halfLifeDays"],
                                                positive=True)
    if "feedbackThreshold" in brain:
        st.brain["feedback_threshold"] = chk.integer(o, "brain.feedbackThreshold",
                                                     brain["feedbackThreshold"], 0)
    if "smallCorpusGuard" in brain:
        st.brain["small_corpus_guard"] = chk.boolean(o, "brain.smallCorpusGuard",
                                                     brain["smallCorpusGuard"])
    if "adaptation" in brain:
        st.brain["adaptation"] = chk.text(o, "brain.adaptation", brain["adaptation"], ADAPTATIONS)
    if "feedbackPool" in brain:
        st.brain["feedback_pool"] = chk.text(o, "brain.feedbackPool", brain["feedbackPool"],
                                             FEEDBACK_POOLS)
    if "refitEvery" in brain:
        st.brain["refit_every"] = chk.integer(o, "brain.refitEvery", brain["refitEvery"], 1)
    if brain.get("weights") is not None:
        weights = chk.mapping(o, "brain.weights", brain["weights"], BRAIN_WEIGHT_KEYS)
        st.brain["weights"] = MappingProxyType(
            {k: chk.number(o, f"brain.weights.{k}", v, positive=False) for k, v in weights.items()})


def _apply_tier_mapping(st: _State, name: str, block: dict[str, Any], o: chk.Origin,
                        env: Mapping[str, str]) -> None:
    """``tiers.NAME`` as a mapping: a ``path``, or a server ``url`` (+ ``schema``, ``token``).

    The URL is kept as written (a ``${VAR}`` inside is expanded by the backend when
    it connects, so the password never has to be in the file) and held as a Secret.
    """
    at = f"tiers.{name}"
    if ("path" in block) == ("url" in block):
        o.fail(at, "needs exactly one of path (an SQLite file) or url (postgresql://... or https://...)")
    if "path" in block:
        st.tier_paths[name] = chk.path(o, f"{at}.path", block["path"], env)
        st.tier_servers.pop(name, None)
        return
    url = block["url"]
    if not isinstance(url, str) or "://" not in url:
        o.fail(f"{at}.url", "expected a URL such as postgresql://user@host:5432/dbname")
    schema = block.get("schema")
    if schema is not None:
        schema = chk.text(o, f"{at}.schema", schema)
    token = block.get("token")
    if token is not None:
        # A token has no other source (unlike a libpq password): ${VAR} is expanded here.
        token = chk.text(o, f"{at}.token", token)
        for var in re.findall(r"\$\{(\w+)\}", token):
            if not env.get(var):
                o.fail(f"{at}.token", f"refers to ${{{var}}}, which is not set; export {var}")
            token = token.replace("${" + var + "}", env[var])
    st.tier_servers[name] = {"url": Secret(url), "schema": schema,
                             "token": Secret(token) if token is not None else None}
    st.tier_paths.pop(name, None)


def _apply_embedding_block(st: _State, block: dict[str, Any], o: chk.Origin, env: Mapping[str, str]) -> None:
    if "provider" not in block:
        o.fail("embedding.provider", f"is required; one of {', '.join(EMBEDDING_PROVIDERS)}")
    e: dict[str, Any] = {"provider": chk.text(o, "embedding.provider", block["provider"], EMBEDDING_PROVIDERS)}
    if block.get("model") is not None:
        e["model"] = chk.text(o, "embedding.model", block["model"])
    if block.get("apiKey") is not None:
        e["api_keys"] = chk.api_keys(o, "embedding.apiKey", block["apiKey"])
    if block.get("baseUrl") is not None:
        e["base_url"] = chk.url(o, "embedding.baseUrl", block["baseUrl"])
    if block.get("inputType") is not None:
        e["input_type"] = chk.text(o, "embedding.inputType", block["inputType"], INPUT_TYPES)
    for yaml_key, field, minimum in (("batchSize", "batch_size", 1), ("dim", "dim", 1),
                                     ("maxInputChars", "max_input_chars", 1)):
        if block.get(yaml_key) is not None:
            e[field] = chk.integer(o, f"embedding.{yaml_key}", block[yaml_key], minimum)
    if block.get("timeout") is not None:
        e["timeout_s"] = chk.number(o, "embedding.timeout", block["timeout"], positive=True)
    if block.get("modelPath") is not None:
        e["model_path"] = str(chk.path(o, "embedding.modelPath", block["modelPath"], env))
    st.embedding, st.embedding_origin = e, o


def _apply_flat(st: _State, values: Mapping[str, Any], o: chk.Origin, env: Mapping[str, str]) -> None:
    """Apply TIERVAULT_* variables or CLI overrides (same flat names; None = not given)."""
    for name in FLAT_KEYS:
        value = values.get(name)
        if value is None:
            continue
        if name == "agent_id":
            st.agent_id = chk.slug(o, name, value)
        elif name.endswith("_tier"):
            st.tier_paths[name.removesuffix("_tier")] = chk.path(o, name, value, env)
            st.tier_servers.pop(name.removesuffix("_tier"), None)
        elif name == "embedding_enabled":
            (st.features.add if chk.boolean(o, name, value) else st.features.discard)(FEATURE_EMBEDDING)
        elif name == "embedding_provider":
            provider = chk.text(o, name, value, EMBEDDING_PROVIDERS)
            if st.embedding is None or st.embedding["provider"] != provider:
                # A different provider keeps only the provider-neutral knobs: a model,
                # URL, key or dimension meant for another provider would be wrong.
                kept = {k: v for k, v in (st.embedding or {}).items()
                        if k in ("input_type", "timeout_s", "max_input_chars")}
                st.embedding, st.embedding_origin = {**kept, "provider": provider}, o
        else:
            if st.embedding is None:
                o.fail(name, "needs an embedding provider: set embedding.provider in agent.yaml, "
                             "TIERVAULT_EMBEDDING_PROVIDER or the embedding_provider override")
            if name == "embedding_model":
                st.embedding["model"] = chk.text(o, name, value)
            else:
                st.embedding["base_url"] = chk.url(o, name, value)


def _finish_embedding(st: _State, env: Mapping[str, str]) -> EmbeddingConfig | None:
    e, o = st.embedding, st.embedding_origin
    if e is None or o is None:
        return None
    provider = e["provider"]
    if provider == "http":
        for yaml_key, field, flat in (("model", "model", "embedding_model"),
                                      ("baseUrl", "base_url", "embedding_base_url")):
            if field not in e:
                o.fail(o.name(f"embedding.{yaml_key}", flat), f"is required for provider 'http' "
                       f"(set embedding.{yaml_key} or TIERVAULT_{flat.upper()})")
    keys = e.get("api_keys") or _env_key_pool(env, provider)
    return EmbeddingConfig(
        provider=provider,
        model=e.get("model") or DEFAULT_EMBEDDING_MODELS[provider],
        api_key=keys[0] if keys else None,
        base_url=e.get("base_url"),
        batch_size=e.get("batch_size"),
        input_type=e.get("input_type"),
        dim=e.get("dim"),
        timeout_s=e.get("timeout_s", 30.0),
        max_input_chars=e.get("max_input_chars", 8000),
        model_path=e.get("model_path"),
        api_keys=keys,
    )


#: What to do about a YAML error that carries no position.
_FIX_YAML = ("check the file with a YAML linter, or compare it with `tiervault init --example` "
             "(agent.yaml must be one YAML mapping of plain UTF-8 text)")


def _read_yaml(path: Path) -> tuple[Any, dict[str, int]]:
    """Parse ``path`` -> (data, {key path: 1-based line})."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError("not UTF-8 text; agent.yaml must be a UTF-8 YAML mapping", file=str(path)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror}", file=str(path)) from exc
    try:
        # Inside the try: the reader refuses NUL/ESC and other control characters at once.
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:
        # No mark here, only the character's offset in ``text``: turn it into line and column.
        # The character's code point is named, never the line around it (it may hold a key).
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise ConfigError(f"malformed YAML: control character U+{exc.character:04X} at column "
                          f"{column}; YAML does not allow it: remove it (retype the value if it "
                          "was pasted)", file=str(path), line=line) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML: {type(exc).__name__}; {_FIX_YAML}",
                          file=str(path)) from exc
    loader.name = str(path)  # marks (and the chained YAMLError) name the file, not "<unicode string>"
    try:
        node = loader.get_single_node()
        lines: dict[str, int] = {}
        if node is not None:
            _collect_lines(node, "", lines, path)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        # Drop the source snippet from the marks: the offending line may hold an API key.
        for mark in (exc.problem_mark, exc.context_mark):
            if mark is not None:
                mark.buffer = None
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or "syntax error"
        if exc.context and exc.context_mark is not None and exc.context_mark is not mark:
            reason = f"{exc.context} (line {exc.context_mark.line + 1}): {reason}"
        raise ConfigError(f"malformed YAML: {reason}. agent.yaml must be one YAML mapping "
                          f"(`tiervault init --example` prints a documented one)", file=str(path),
                          line=mark.line + 1 if mark else None) from exc
    except yaml.YAMLError as exc:  # no position to give: say what to check instead
        raise ConfigError(f"malformed YAML: {type(exc).__name__}; {_FIX_YAML}",
                          file=str(path)) from exc
    except RecursionError as exc:
        raise ConfigError("malformed YAML: nested too deeply for a configuration",
                          file=str(path)) from exc
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a date 2024-13-45
        raise ConfigError(f"invalid value: {str(exc)[:120]}", file=str(path)) from exc
    finally:
        loader.dispose()
    return data, lines


def _collect_lines(node: yaml.Node, prefix: str, lines: dict[str, int], path: Path,
                   seen: set[int] | None = None) -> None:
    lines.setdefault(prefix, node.start_mark.line + 1)
    # An alias is the same node object again: walk each node once, or nested
    # aliases ("billion laughs") would take exponential time.
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` merges; not a key of its own
                continue
            key = chk.join(prefix, key_node.value) if isinstance(key_node, yaml.ScalarNode) else prefix
            if key != prefix and key in lines:
                raise ConfigError(f"{key}: duplicate key (first defined at line {lines[key]}); "
                                  "each key may appear once", file=str(path),
                                  line=key_node.start_mark.line + 1, key=key)
            lines[key] = key_node.start_mark.line + 1
            _collect_lines(value_node, key, lines, path, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_lines(item, f"{prefix}[{i}]", lines, path, seen)


class ConfigLocation(NamedTuple):
    """Which agent.yaml is in force and how it was found.

    ``source``: "argument" (``--config``), "cwd" (./agent.yaml), "parent" (an
    agent.yaml in a parent folder), "env" (``$TIERVAULT_CONFIG``) or "default"
    (no file: built-in defaults, the agent tier under ~/.tiervault/).
    """

    path: Path | None
    source: str


def locate_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None,
                  cwd: Path | None = None) -> ConfigLocation:
    """The config file in force: an explicit ``path``, else the first ``agent.yaml`` in
    ``cwd`` or one of its parents (as git finds its repository), else
    ``$TIERVAULT_CONFIG``, else none (built-in defaults).

    A file named explicitly (argument or variable) must exist (ConfigError).
    """
    env = os.environ if env is None else env
    if path is not None and str(path):
        candidate, named_by, source = Path(path).expanduser(), "the --config path", "argument"
    else:
        here = (cwd or Path.cwd()).absolute()
        for folder in (here, *here.parents):
            found = folder / DEFAULT_CONFIG_NAME
            if found.is_file():
                return ConfigLocation(found, "cwd" if folder == here else "parent")
        if not env.get(CONFIG_ENV_VAR):
            return ConfigLocation(None, "default")
        candidate, named_by, source = Path(env[CONFIG_ENV_VAR]).expanduser(), CONFIG_ENV_VAR, "env"
    candidate = candidate.absolute()
    if not candidate.is_file():
        what = "is a directory, not a YAML file" if candidate.is_dir() else "does not exist"
        raise ConfigError(f"config file named by {named_by} {what}; create one with "
                          "`tiervault init` or fix the path", file=str(candidate))
    return ConfigLocation(candidate, source)


def resolve_config_path(path: str | Path | None = None, *,
                        env: Mapping[str, str] | None = None) -> Path | None:
    """The path of :func:`locate_config` (None: no file, built-in defaults)."""
    return locate_config(path, env=env).path


def load_settings(path: str | Path | None = None, *, env: Mapping[str, str] | None = None,
                  overrides: Mapping[str, Any] | None = None) -> Settings:
    """Merge defaults < agent.yaml < ``TIERVAULT_*`` env < ``overrides`` into :class:`Settings`.

    ``env`` defaults to ``os.environ``; ``overrides`` takes the flat names of
    :data:`FLAT_KEYS` (CLI flags; None values mean "flag not given").
    """
    env = os.environ if env is None else env
    cwd = Path.cwd()
    st = _State()
    location = locate_config(path, env=env)
    config_path = location.path
    if config_path is not None:
        data, lines = _read_yaml(config_path)
        _apply_yaml(st, data, chk.Origin("yaml", config_path.parent, config_path, lines), env)
    # An empty variable counts as unset, as in most shells' ${VAR:-default} idiom.
    env_values = {n: env.get(f"TIERVAULT_{n.upper()}") or None for n in FLAT_KEYS}
    _apply_flat(st, env_values, chk.Origin("env", cwd), env)
    if overrides:
        override_origin = chk.Origin("override", cwd)
        for name in overrides:
            if name not in FLAT_KEYS:
                override_origin.fail(str(name), f"unknown setting. Allowed: {', '.join(FLAT_KEYS)}."
                                                f"{chk.hint(str(name), FLAT_KEYS)}")
        _apply_flat(st, overrides, override_origin, env)

    agent_id = st.agent_id or "default"
    paths = {"agent": chk.home(env) / ".tiervault" / "agents" / f"{agent_id}.db", **st.tier_paths}
    for name in st.tier_servers:
        paths.pop(name, None)
    tiers = tuple(
        TierConfig(n, None, st.tier_weights[n], False, **st.tier_servers[n]) if n in st.tier_servers
        else TierConfig(n, paths[n], st.tier_weights[n], False)
        for n in TIER_NAMES if n in paths or n in st.tier_servers)
    return Settings(
        agent_id=agent_id,
        tiers=tiers + tuple(st.sources),
        embedding=_finish_embedding(st, env),
        features=frozenset(st.features),
        brain=BrainConfig(**st.brain),
        config_path=config_path,
        config_source=location.source,
    )


_DEFAULT_TEMPLATE = """\
# tiervault configuration, written by `tiervault init`.
# `tiervault init --example` prints an agent.yaml documenting every key.
# Precedence: built-in defaults < this file < TIERVAULT_* environment < CLI flags.

# Names this agent and its private tier file (lowercase slug).
agent_id: {agent_id}

# One SQLite file per tier; each is optional. `~` and ${{VAR}} are expanded and
# relative paths are resolved against the directory of this file.
tiers:
  agent: ~/.tiervault/agents/{agent_id}.db   # this agent's own knowledge
  project: .tiervault/project.db             # shared by the agents of this project
  team: ~/.tiervault/team.db                 # shared by the whole team

# Priority weights applied to each tier's normalised search scores.
tier_weights:
  agent: 1.0
  project: 0.8
  team: 0.6

# Vector search is off until an `embedding:` block exists AND this flag is true.
features:
  embedding-enabled: false
"""


def write_default_config(directory: Path, agent_id: str, *, force: bool = False) -> Path:
    """Write ``directory/agent.yaml`` for ``tiervault init``; returns its path.

    Refuses to overwrite an existing file (ConfigError) unless ``force``.
    """
    agent_id = chk.slug(chk.Origin("argument", Path(directory)), "agent_id", agent_id)
    directory = Path(directory).expanduser()
    target = directory / DEFAULT_CONFIG_NAME
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # Mode "x" makes the existence check and the creation one step.
        with target.open("w" if force else "x", encoding="utf-8") as fh:
            fh.write(_DEFAULT_TEMPLATE.format(agent_id=agent_id))
    except FileExistsError as exc:
        raise ConfigError("already exists; not overwritten (use --force to replace it)",
                          file=str(target)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot write the file: {exc.strerror}", file=str(target)) from exc
    return target

"""tiervault.config: agent.yaml parsing, precedence, errors with file/line/key, no secret leaks."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest

from tiervault.config import (
    DEFAULT_TIER_WEIGHTS,
    BrainConfig,
    Secret,
    load_settings,
    resolve_config_path,
    write_default_config,
)
from tiervault.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
PLANTED = "sk-planted-0123456789abcdef"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory (the implicit ./agent.yaml lives here)."""
    w = tmp_path / "work"
    w.mkdir()
    monkeypatch.chdir(w)
    return w


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def config_error(path: Path, home: Path, **kw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={"HOME": str(home)}, **kw)
    return info.value


# -- defaults and full parsing ------------------------------------------------------------

def test_defaults_without_a_file(work: Path, home: Path) -> None:
    s = load_settings(env={"HOME": str(home)})
    assert s.config_path is None
    assert s.agent_id == "default"
    assert [t.name for t in s.tiers] == ["agent"]
    agent = s.tier("agent")
    assert agent.path == home / ".tiervault" / "agents" / "default.db"
    assert (agent.weight, agent.read_only) == (1.0, False)
    assert s.tier("project") is None and s.tier("team") is None
    assert s.embedding is None and not s.embedding_enabled and s.features == frozenset()
    assert s.brain == BrainConfig(365.0, 30, None, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.agent_id = "other"  # type: ignore[misc]


def test_empty_file_is_an_error_and_an_empty_mapping_means_defaults(work: Path,
                                                                    home: Path) -> None:
    path = write(work / "agent.yaml", "# nothing yet\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env={"HOME": str(home)})
    assert info.value.file == str(path) and "empty" in str(info.value)
    assert "tiervault init" in str(info.value)
    write(work / "agent.yaml", "{}\n")
    s = load_settings(env={"HOME": str(home)})
    assert s.config_path == path and s.agent_id == "default" and len(s.tiers) == 1


def test_full_file(tmp_path: Path, home: Path) -> None:
    path = write(tmp_path / "cfg" / "agent.yaml", """
        agent_id: reviewer-1
        tiers:
          agent: /data/agent.db
          project: proj/p.db
          team: /data/team.db
        tier_weights: {project: 0.7, team: 0.5}
        sources:
          - {name: security-pack, path: packs/sec.db, weight: 0.4}
          - {name: style, path: /packs/style.db}
        embedding:
          provider: voyage
          model: voyage-3.5-lite
          apiKey: vk-one
          baseUrl: https://proxy.example/v1/
          batchSize: 64
          inputType: query
          dim: 512
          timeout: 12.5
          maxInputChars: 4000
          modelPath: models/m
        features:
          embedding-enabled: true
        brain:
          halfLifeDays: 90
          feedbackThreshold: 10
          smallCorpusGuard: false
          weights: {semantic: 0.4, graphProximity: 0}
        """)
    s = load_settings(path, env={"HOME": str(home)})
    base = tmp_path / "cfg"
    assert s.config_path == path and s.agent_id == "reviewer-1"
    assert [(t.name, t.path, t.weight, t.read_only) for t in s.tiers] == [
        ("agent", Path("/data/agent.db"), 1.0, False),
        ("project", base / "proj" / "p.db", 0.7, False),
        ("team", Path("/data/team.db"), 0.5, False),
        ("security-pack", base / "packs" / "sec.db", 0.4, True),
        ("style", Path("/packs/style.db"), 0.5, True),
    ]
    e = s.embedding
    assert (e.provider, e.model, e.base_url, e.batch_size, e.input_type, e.dim) == (
        "voyage", "voyage-3.5-lite", "https://proxy.example/v1", 64, "query", 512)
    assert (e.timeout_s, e.max_input_chars, e.model_path) == (12.5, 4000, str(base / "models" / "m"))
    assert e.api_key.reveal() == "vk-one" and e.api_keys == (Secret("vk-one"),)
    assert s.embedding_enabled
    assert s.brain.half_life_days == 90.0 and s.brain.feedback_threshold == 10
    assert s.brain.small_corpus_guard is False
    assert dict(s.brain.weights) == {"semantic": 0.4, "graphProximity": 0.0}


def test_default_models_per_provider(tmp_path: Path, home: Path) -> None:
    expected = {"openai": "text-embedding-3-small", "voyage": "voyage-3.5",
                "ollama": "nomic-embed-text", "hash": "hash-v1", "local": "all-MiniLM-L6-v2-int8-tanh"}
    for provider, model in expected.items():
        path = write(tmp_path / f"{provider}.yaml", f"embedding: {{provider: {provider}}}\n")
        assert load_settings(path, env={"HOME": str(home)}).embedding.model == model


def test_path_expansion_home_env_and_relative(tmp_path: Path, home: Path) -> None:
    path = write(tmp_path / "conf" / "agent.yaml", """
        tiers:
          agent: ~/vault/a.db
          project: ${PROJ_ROOT}/p.db
          team: ../shared/${TEAM}.db
        """)
    env = {"HOME": str(home), "PROJ_ROOT": "/srv/proj", "TEAM": "core"}
    s = load_settings(path, env=env)
    assert s.tier("agent").path == home / "vault" / "a.db"
    assert s.tier("project").path == Path("/srv/proj/p.db")
    assert s.tier("team").path == tmp_path / "shared" / "core.db"  # relative to the yaml's directory


def test_default_agent_tier_follows_agent_id(tmp_path: Path, home: Path) -> None:
    path = write(tmp_path / "agent.yaml", "agent_id: scout\n")
    assert load_settings(path, env={"HOME": str(home)}).tier("agent").path == (
        home / ".tiervault" / "agents" / "scout.db")


# -- precedence: defaults < yaml < env < overrides ----------------------------------------

@pytest.mark.parametrize(
    ("yaml_line", "env_var", "env_value", "override", "override_value", "read"),
    [
        ("agent_id: from-yaml", "TIERVAULT_AGENT_ID", "from-env", "agent_id", "from-flag",
         lambda s: s.agent_id),
        ("tiers: {project: /y/p.db}", "TIERVAULT_PROJECT_TIER", "/e/p.db", "project_tier", "/f/p.db",
         lambda s: str(s.tier("project").path) if s.tier("project") else None),
        ("tiers: {team: /y/t.db}", "TIERVAULT_TEAM_TIER", "/e/t.db", "team_tier", "/f/t.db",
         lambda s: str(s.tier("team").path) if s.tier("team") else None),
        ("embedding: {provider: openai, model: y-model}", "TIERVAULT_EMBEDDING_MODEL", "e-model",
         "embedding_model", "f-model", lambda s: s.embedding.model if s.embedding else None),
        ("embedding: {provider: ollama, baseUrl: 'http://y:1'}", "TIERVAULT_EMBEDDING_BASE_URL",
         "http://e:2", "embedding_base_url", "http://f:3",
         lambda s: s.embedding.base_url if s.embedding else None),
    ],
)
def test_precedence_chain(tmp_path: Path, home: Path, yaml_line, env_var, env_value,
                          override, override_value, read) -> None:
    empty = write(tmp_path / "empty.yaml", "{}\n")
    path = write(tmp_path / "agent.yaml", yaml_line + "\n")
    env = {"HOME": str(home)}
    default = read(load_settings(empty, env=env))
    from_yaml = read(load_settings(path, env=env))
    from_env = read(load_settings(path, env={**env, env_var: env_value}))
    from_flag = read(load_settings(path, env={**env, env_var: env_value},
                                   overrides={override: override_value}))
    assert from_yaml != default
    assert from_env == env_value and from_env != from_yaml
    assert from_flag == override_value
    # A None override is a flag that was not given: the environment still wins.
    assert read(load_settings(path, env={**env, env_var: env_value}, overrides={override: None})) == env_value


def test_embedding_enabled_precedence_and_logic(tmp_path: Path, home: Path) -> None:
    env = {"HOME": str(home)}
    block_only = write(tmp_path / "a.yaml", "embedding: {provider: hash}\n")
    flag_only = write(tmp_path / "b.yaml", "features: {embedding-enabled: true}\n")
    both = write(tmp_path / "c.yaml", "embedding: {provider: hash}\nfeatures: {embedding-enabled: true}\n")
    assert not load_settings(block_only, env=env).embedding_enabled  # block without the flag
    s = load_settings(flag_only, env=env)
    assert "embedding-enabled" in s.features and not s.embedding_enabled  # flag without a block
    assert load_settings(both, env=env).embedding_enabled
    assert not load_settings(both, env={**env, "TIERVAULT_EMBEDDING_ENABLED": "0"}).embedding_enabled
    assert load_settings(block_only, env={**env, "TIERVAULT_EMBEDDING_ENABLED": "true"}).embedding_enabled
    assert not load_settings(block_only, env={**env, "TIERVAULT_EMBEDDING_ENABLED": "true"},
                             overrides={"embedding_enabled": False}).embedding_enabled
    # The environment alone can configure the provider.
    s = load_settings(flag_only, env={**env, "TIERVAULT_EMBEDDING_PROVIDER": "hash"})
    assert s.embedding_enabled and s.embedding.model == "hash-v1"


def test_provider_change_drops_provider_specific_values(tmp_path: Path, home: Path) -> None:
    path = write(tmp_path / "agent.yaml", """
        embedding: {provider: voyage, model: voyage-3.5, apiKey: vk-x, dim: 1024, timeout: 5}
        """)
    e = load_settings(path, env={"HOME": str(home), "TIERVAULT_EMBEDDING_PROVIDER": "openai",
                                 "OPENAI_API_KEY": "sk-env"}).embedding
    assert (e.provider, e.model, e.dim, e.timeout_s) == ("openai", "text-embedding-3-small", None, 5.0)
    assert e.api_key.reveal() == "sk-env"


def test_relative_env_and_override_paths_resolve_against_cwd(work: Path, home: Path) -> None:
    s = load_settings(env={"HOME": str(home), "TIERVAULT_PROJECT_TIER": "p/e.db"},
                      overrides={"team_tier": Path("t.db")})
    assert s.tier("project").path == work / "p" / "e.db"
    assert s.tier("team").path == work / "t.db"


# -- config path resolution ------------------------------------------------------------

def test_resolve_config_path(work: Path, home: Path, tmp_path: Path) -> None:
    assert resolve_config_path(env={}) is None  # implicit ./agent.yaml absent: defaults
    implicit = write(work / "agent.yaml", "agent_id: here\n")
    assert resolve_config_path(env={}) == implicit
    named = write(tmp_path / "named.yaml", "agent_id: named\n")
    # ./agent.yaml (or a parent's) comes before the variable; the variable is the fallback.
    assert load_settings(env={"HOME": str(home), "TIERVAULT_CONFIG": str(named)}).agent_id == "here"
    implicit.unlink()
    assert load_settings(env={"HOME": str(home), "TIERVAULT_CONFIG": str(named)}).agent_id == "named"
    implicit = write(work / "agent.yaml", "agent_id: here\n")
    env = {"HOME": str(home), "TIERVAULT_CONFIG": str(implicit)}
    assert load_settings(named, env=env).agent_id == "named"  # an explicit path beats the variable
    implicit.unlink()
    for kwargs in ({"path": tmp_path / "missing.yaml", "env": {}},
                   {"env": {"TIERVAULT_CONFIG": str(tmp_path / "gone.yaml")}}):
        with pytest.raises(ConfigError) as info:
            resolve_config_path(**kwargs)
        assert "does not exist" in str(info.value) and info.value.file.endswith(".yaml")


def test_agent_yaml_is_found_in_a_parent_folder_as_git_finds_its_repository(
        work: Path, home: Path) -> None:
    from tiervault.config import locate_config

    top = write(work / "agent.yaml", "agent_id: top\n")
    deep = work / "src" / "pkg"
    deep.mkdir(parents=True)
    assert locate_config(env={}, cwd=deep) == (top, "parent")
    assert locate_config(env={}, cwd=work) == (top, "cwd")
    inner = write(work / "src" / "agent.yaml", "agent_id: inner\n")
    assert locate_config(env={}, cwd=deep) == (inner, "parent")  # the nearest one wins


# -- errors: file, line, key, what is allowed ---------------------------------------------

@pytest.mark.parametrize(
    ("text", "line", "key", "fragments"),
    [
        ("agent_id: a\nagentid: b\n", 2, "agentid",
         ["unknown key 'agentid'", "Did you mean 'agent_id'?", "embedding, features, brain"]),
        ("embedding:\n  provider: openai\n  batchsize: 10\n", 3, "embedding.batchsize",
         ["Did you mean 'batchSize'?", "apiKey, baseUrl, batchSize, inputType"]),
        ("embedding:\n  provider: openai\n\n  batchSize: ten\n", 4, "embedding.batchSize",
         ["expected an integer >= 1", "got a string"]),
        ("embedding:\n  provider: cohere\n", 2, "embedding.provider",
         ["openai, voyage, ollama, http, hash, local", "'cohere'"]),
        ("embedding:\n  provider: voyage\n  inputType: passage\n", 3, "embedding.inputType",
         ["document, query"]),
        ("embedding:\n  model: x\n", 1, "embedding.provider", ["is required", "openai, voyage"]),
        ("embedding: {provider: http, baseUrl: 'http://127.0.0.1:9'}\n", 1, "embedding.model",
         ["required for provider 'http'"]),
        ("tier_weights:\n  agent: 1\n  team: -0.5\n", 3, "tier_weights.team", ["number > 0"]),
        ("tiers:\n  agent: 12\n", 2, "tiers.agent", ["expected a non-empty string", "an integer"]),
        ("tiers:\n  project: ${NOPE}/p.db\n", 2, "tiers.project", ["${NOPE}", "not set"]),
        ("features:\n  embedding-enabled: 'yes'\n", 2, "features.embedding-enabled", ["true or false"]),
        ("features:\n  vectors: true\n", 2, "features.vectors", ["embedding-enabled"]),
        ("brain:\n  weights:\n    semantics: 0.3\n", 3, "brain.weights.semantics",
         ["Did you mean 'semantic'?", "temporalDecay, tagOverlap"]),
        ("agent_id: Bad Id\n", 1, "agent_id", ["not a slug", "lowercase letters"]),
        ("sources:\n  - name: extra\n    path: x.db\n  - name: extra\n    path: y.db\n", 4,
         "sources[1].name", ["already taken", "agent, project, team, extra"]),
        ("sources:\n  - name: pack\n", 2, "sources[0].path", ["is required"]),
        ("agent_id: a\ntiers: {}\nagent_id: b\n", 3, "agent_id", ["duplicate key", "line 1"]),
        ("- agent_id: a\n", 1, None, ["expected a mapping", "agent_id, tiers, tier_weights"]),
        ("agent_id: a\ntiers:\n  agent: [unclosed\n", 4, None, ["malformed YAML", "line 3"]),
        ("agent_id: a\n  tiers: x\n", 2, None, ["malformed YAML", "mapping values are not allowed"]),
    ],
)
def test_error_names_file_line_key_and_allowed(tmp_path: Path, home: Path, text, line, key,
                                                fragments) -> None:
    path = write(tmp_path / "agent.yaml", text)
    err = config_error(path, home)
    assert (err.file, err.line, err.key) == (str(path), line, key)
    message = str(err)
    assert message.startswith(f"{path}:{line}: ")
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize("text, line, column, char", [
    ("agent_id: a\ntiers:\n  agent: x\x00y.db\n", 3, 11, "U+0000"),
    (f"agent_id: a\nembedding:\n  apiKey: {PLANTED}\x1b\n", 3, 38, "U+001B"),
])
def test_control_character_error_says_where_and_what_to_do(tmp_path: Path, home: Path, text,
                                                            line, column, char) -> None:
    # PyYAML's reader error has no line mark, only a character offset: the message must
    # still name the line, the column and the character, and say to remove it
    path = tmp_path / "agent.yaml"
    path.write_text(text, encoding="utf-8")
    err = config_error(path, home)
    assert (err.file, err.line) == (str(path), line)
    message = str(err)
    assert message.startswith(f"{path}:{line}: ")
    assert f"column {column}" in message and char in message and "remove it" in message
    assert_no_secret(message, repr(err), full_report(err))
    # the CLI: one line on stderr, exit status 2, no traceback
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    r = subprocess.run([sys.executable, "-m", "tiervault", "stats", "--config", str(path)],
                       cwd=tmp_path, env={**env, "HOME": str(home)}, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "remove it" in r.stderr, r.stderr
    assert_no_secret(r.stderr, r.stdout)


def test_env_and_override_errors_name_the_variable(work: Path, home: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={"HOME": str(home), "TIERVAULT_EMBEDDING_ENABLED": "maybe"})
    assert info.value.key == "TIERVAULT_EMBEDDING_ENABLED"
    assert "1, true, yes, on, 0, false" in str(info.value) and "'maybe'" in str(info.value)
    with pytest.raises(ConfigError) as info:
        load_settings(env={"HOME": str(home)}, overrides={"agent_tiers": "x.db"})
    assert "Did you mean 'agent_tier'?" in str(info.value) and "embedding_provider" in str(info.value)
    with pytest.raises(ConfigError) as info:
        load_settings(env={"HOME": str(home), "TIERVAULT_EMBEDDING_MODEL": "m"})
    assert info.value.key == "TIERVAULT_EMBEDDING_MODEL" and "TIERVAULT_EMBEDDING_PROVIDER" in str(info.value)


# -- secrets -------------------------------------------------------------------------------

def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert PLANTED not in text and PLANTED[3:15] not in text


def full_report(err: BaseException) -> str:
    """Everything a traceback would print, including chained causes."""
    return "".join(traceback.format_exception(err))


def test_secret_wrapper() -> None:
    s = Secret(PLANTED)
    assert repr(s) == str(s) == f"{s}" == "Secret('***')"
    assert s.reveal() == PLANTED and s == Secret(PLANTED) and s != Secret("other")
    with pytest.raises(AttributeError):
        s._value = "x"  # type: ignore[misc]


def test_planted_key_never_appears_in_settings(tmp_path: Path, home: Path) -> None:
    path = write(tmp_path / "agent.yaml", f"embedding:\n  provider: openai\n  apiKey: {PLANTED}\n")
    s = load_settings(path, env={"HOME": str(home)})
    assert s.embedding.api_key.reveal() == PLANTED
    assert_no_secret(repr(s), str(s), repr(s.embedding), f"{s.embedding.api_keys}")


@pytest.mark.parametrize(
    "text",
    [
        # a wrong type elsewhere in the same file
        f"embedding:\n  provider: openai\n  apiKey: {PLANTED}\n  batchSize: many\n",
        f"embedding:\n  provider: openai\n  apiKey: {PLANTED}\n  baseUrl: ftp://{PLANTED}@host\n",
        # the key itself has the wrong shape: the type is named, never the value
        f"embedding:\n  provider: openai\n  apiKey: {{token: {PLANTED}}}\n",
        f"embedding:\n  provider: openai\n  apiKey: [{PLANTED}, 42]\n",
        # malformed YAML on the key's own line: no source snippet in the error or its cause
        f'embedding:\n  provider: openai\n  apiKey: "{PLANTED}\n',
        f"embedding:\n  provider: openai\n  apiKey: {PLANTED}: {PLANTED}\n",
    ],
    ids=["type-error-elsewhere", "bad-url-elsewhere", "key-is-mapping", "key-list-with-int",
         "unterminated-quote", "yaml-syntax-on-key-line"],
)
def test_planted_key_never_appears_in_errors(tmp_path: Path, home: Path, text: str) -> None:
    path = write(tmp_path / "agent.yaml", text)
    err = config_error(path, home)
    assert err.file == str(path) and err.line is not None
    assert_no_secret(str(err), repr(err), full_report(err))


def test_api_key_type_error_names_the_type(tmp_path: Path, home: Path) -> None:
    text = f"embedding:\n  provider: voyage\n  apiKey:\n    - {PLANTED}\n    - 42\n"
    path = write(tmp_path / "agent.yaml", text)
    err = config_error(path, home)
    assert (err.line, err.key) == (5, "embedding.apiKey[1]")
    assert "got an integer" in str(err)


def test_key_pools(tmp_path: Path, home: Path) -> None:
    listed = write(tmp_path / "a.yaml", "embedding:\n  provider: openai\n  apiKey: [k-one, ' k-two ']\n")
    e = load_settings(listed, env={"HOME": str(home), "OPENAI_API_KEY": "ignored"}).embedding
    assert [k.reveal() for k in e.api_keys] == ["k-one", "k-two"] and e.api_key.reveal() == "k-one"
    for provider, var in (("openai", "OPENAI_API_KEY"), ("http", "OPENAI_API_KEY"),
                          ("voyage", "VOYAGE_API_KEY")):
        path = write(tmp_path / f"{provider}.yaml",
                     f"embedding: {{provider: {provider}, model: m, baseUrl: 'http://127.0.0.1:9'}}\n")
        e = load_settings(path, env={"HOME": str(home), var: "e1, e2,,e3"}).embedding
        assert [k.reveal() for k in e.api_keys] == ["e1", "e2", "e3"]
    hashed = write(tmp_path / "h.yaml", "embedding: {provider: hash}\n")
    e = load_settings(hashed, env={"HOME": str(home), "OPENAI_API_KEY": "unused"}).embedding
    assert e.api_key is None and e.api_keys == ()


# -- shipped files -------------------------------------------------------------------------

def test_example_file_loads(home: Path) -> None:
    s = load_settings(REPO / "agent.yaml.example", env={"HOME": str(home)})
    assert s.agent_id == "my-agent"
    assert [t.name for t in s.tiers] == ["agent", "project", "team"]
    assert {t.name: t.weight for t in s.tiers} == dict(DEFAULT_TIER_WEIGHTS)
    assert s.tier("project").path == REPO / ".tiervault" / "project.db"
    assert s.embedding.provider == "hash" and not s.embedding_enabled


def test_write_default_config(tmp_path: Path, home: Path) -> None:
    target = tmp_path / "proj"
    path = write_default_config(target, "builder")
    assert path == target / "agent.yaml"
    s = load_settings(path, env={"HOME": str(home)})
    assert s.agent_id == "builder"
    assert s.tier("agent").path == home / ".tiervault" / "agents" / "builder.db"
    assert s.tier("project").path == target / ".tiervault" / "project.db"
    assert s.tier("team").path == home / ".tiervault" / "team.db"
    assert "#" in path.read_text()
    path.write_text("agent_id: edited\n")
    with pytest.raises(ConfigError) as info:
        write_default_config(target, "builder")
    assert info.value.file == str(path) and "already exists" in str(info.value)
    assert path.read_text() == "agent_id: edited\n"
    write_default_config(target, "other", force=True)
    assert load_settings(path, env={"HOME": str(home)}).agent_id == "other"
    with pytest.raises(ConfigError):
        write_default_config(tmp_path / "x", "Not A Slug")

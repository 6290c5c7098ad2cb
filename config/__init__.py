"""tiervault.config: agent.yaml + ``TIERVAULT_*`` environment + CLI flags -> frozen Settings.

Precedence: built-in defaults < agent.yaml < ``TIERVAULT_*`` environment < overrides.
Importing this package reads nothing; call :func:`load_settings`.
"""

from tiervault.config.loader import (
    CONFIG_ENV_VAR,
    FLAT_KEYS,
    ConfigLocation,
    load_settings,
    locate_config,
    resolve_config_path,
    write_default_config,
)
from tiervault.config.settings import (
    BRAIN_WEIGHT_KEYS,
    DEFAULT_EMBEDDING_MODELS,
    DEFAULT_TIER_WEIGHTS,
    EMBEDDING_PROVIDERS,
    FEATURE_EMBEDDING,
    TIER_NAMES,
    BrainConfig,
    EmbeddingConfig,
    Secret,
    Settings,
    TierConfig,
)

__all__ = [
    "Settings",
    "TierConfig",
    "EmbeddingConfig",
    "BrainConfig",
    "Secret",
    "load_settings",
    "locate_config",
    "ConfigLocation",
    "resolve_config_path",
    "write_default_config",
    "DEFAULT_TIER_WEIGHTS",
    "DEFAULT_EMBEDDING_MODELS",
    "EMBEDDING_PROVIDERS",
    "BRAIN_WEIGHT_KEYS",
    "TIER_NAMES",
    "FEATURE_EMBEDDING",
    "CONFIG_ENV_VAR",
    "FLAT_KEYS",
]

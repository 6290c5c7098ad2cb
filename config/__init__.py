"""tiervault.config."""

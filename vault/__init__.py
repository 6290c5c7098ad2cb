"""tiervault.vault."""

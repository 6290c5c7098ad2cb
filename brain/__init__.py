"""tiervault.brain."""

"""tiervault: a tiered knowledge vault for AI agents."""

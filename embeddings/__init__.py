"""tiervault.embeddings."""

"""The web page for the people who curate an agent's knowledge (``tiervault ui`` / ``serve``)."""

__all__: list[str] = []

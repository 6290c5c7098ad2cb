"""The TF-IDF stop words written out in vault/stop_words.py are scikit-learn's list."""

from __future__ import annotations

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as SKLEARN_STOP_WORDS

from tiervault.vault.stop_words import ENGLISH_STOP_WORDS
from tiervault.vault.tokenizer import STOP_WORDS


def test_the_list_is_scikit_learns_word_for_word():
    assert ENGLISH_STOP_WORDS == frozenset(SKLEARN_STOP_WORDS)
    assert len(ENGLISH_STOP_WORDS) == 318
    assert STOP_WORDS.get() == frozenset(SKLEARN_STOP_WORDS)


def test_a_build_process_needs_no_scikit_learn(tmp_path):
    """A first mirror build (stop words, TF-IDF fit, latent SVD) imports no scikit-learn:
    the build workers saved its import (~0.6 s of CPU each)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tiervault.vault.entry import Entry\n"
        "from tiervault.vault.store import TierStore\n"
        f"store = TierStore({str(tmp_path / 't.db')!r}, name='t')\n"
        "store.capture_many([Entry.from_dict({'title': f'retry number {i} of the cache',"
        " 'description': f'backoff with jitter {i % 7} and the other words', 'type': 'pattern'})"
        " for i in range(60)])\n"
        "p = store.postings()\n"
        "assert p.latent_V is not None and p.base_rows == 60, (p.latent_V, p.base_rows)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

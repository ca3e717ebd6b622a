"""jieba, loaded once per process for every Chinese text rule of the reference: word
segmentation for lexical retrieval (`reference.lexical`) and part-of-speech tags for the
PII detector (`reference.pii.chinese`). One dictionary for both, its cache in the
temporary directory (nothing is written beside the code), its log silenced.

Loading takes about a second: a process that serves turns calls `load` at start
(`ForgettingEngine`), so the first Chinese turn does not pay it.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from functools import cache
from typing import Any

__all__ = ["load", "segmenter", "tagger"]

_lock = threading.Lock()


@cache
def segmenter() -> Any:
    """jieba's default tokenizer (`cut`, `cut_for_search`, `FREQ`), initialised."""
    with _lock:
        import jieba

        jieba.setLogLevel(logging.WARNING)
        logging.getLogger("jieba").setLevel(logging.WARNING)
        jieba.dt.tmp_dir = tempfile.gettempdir()
        jieba.dt.initialize()
        return jieba.dt


@cache
def tagger() -> Any:
    """jieba's part-of-speech tokenizer over the same dictionary."""
    segmenter()
    with _lock:
        import jieba.posseg

        return jieba.posseg.dt


def load() -> None:
    """Load the dictionary and the tagger now rather than on the first Chinese text."""
    tagger()

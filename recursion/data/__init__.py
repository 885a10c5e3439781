"""Data shipped with the package: the Stanford Sentiment Treebank parse trees (``sst/``).

``sst/README.md`` carries the citation (Socher et al., EMNLP 2013) and the
trees' shape statistics. The files ship as package data, so a fresh clone or
a ``pip install`` has them::

    import recursion
    trees = [recursion.parse_ptb(line) for line in open(recursion.data.sst_path("test"))]
"""

from __future__ import annotations

from pathlib import Path

from scheduler.errors import did_you_mean

#: The SST splits and their sentence counts.
SST_SPLITS: dict[str, int] = {"train": 8544, "dev": 1101, "test": 2210}

#: Directory of the shipped SST files (``train.txt``, ``dev.txt``, ``test.txt``, ``README.md``).
SST_DIR = Path(__file__).resolve().parent / "sst"


def sst_path(split: str = "test") -> Path:
    """Path of one SST split (``train``, ``dev`` or ``test``): one PTB-bracketed tree a line.

    Raises:
        ConfigError: unknown split name ("did you mean …").
    """
    if split not in SST_SPLITS:
        raise did_you_mean("SST split", split, SST_SPLITS)
    return SST_DIR / f"{split}.txt"


__all__ = ["SST_DIR", "SST_SPLITS", "sst_path"]

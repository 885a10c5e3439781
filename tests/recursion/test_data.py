"""The SST trees ship with the package: every split is present, complete and parseable."""

from __future__ import annotations

import pytest

import recursion
from recursion.data import SST_DIR, SST_SPLITS, sst_path
from edgert.errors import ConfigError


@pytest.mark.parametrize("split", sorted(SST_SPLITS))
def test_each_split_has_its_sentence_count(split: str) -> None:
    lines = [ln for ln in sst_path(split).read_text().splitlines() if ln.strip()]
    assert len(lines) == SST_SPLITS[split]
    assert recursion.parse_ptb(lines[0]).label in {"0", "1", "2", "3", "4"}


def test_the_citation_ships_beside_the_data() -> None:
    readme = (SST_DIR / "README.md").read_text()
    assert "Socher" in readme and "EMNLP 2013" in readme


def test_unknown_split_suggests_the_close_one() -> None:
    with pytest.raises(ConfigError, match="did you mean 'test'"):
        sst_path("tset")

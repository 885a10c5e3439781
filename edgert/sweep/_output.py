"""A sweep's output file: the record of its cells, written as they finish, read back to resume.

The format follows the suffix: ``.csv`` (``pandas.read_csv`` loads it as is) or ``.parquet``
(needs ``pyarrow``: ``pip install 'edgert[parquet]'``). Columns: the grid's keys (values as
written), ``model`` with ``--per-model`` (``all`` on a cell's own row), the figures
(:data:`~edgert.sweep._cell.FIGURES`), then ``wall_s``, ``error``, ``edgert_version`` and
``key`` — the cell's identity (its parameters, edgert's version, its input files' sha256). A
rerun to the same file keeps every row whose key it would compute again and has no error, and
runs the rest: the file is the only record, there is no other cache.

Every write goes to a temporary file that then replaces the output, so an interrupted write
never leaves half a file.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgert.errors import ConfigError
from edgert.sweep._cell import FIGURES

#: Suffixes ``-o`` takes.
SUFFIXES: tuple[str, ...] = (".csv", ".parquet")
#: Columns after the figures.
TAIL: tuple[str, ...] = ("wall_s", "error", "edgert_version", "key")


def header(keys: Sequence[str], per_model: bool) -> list[str]:
    """The output's columns for a grid with ``keys``."""
    return [*keys, *(["model"] if per_model else []), *FIGURES, *TAIL]


class Output:
    """The output file of a sweep: :meth:`resumable` rows from a previous run, :meth:`write` all rows."""

    def __init__(self, path: str | Path, columns: Sequence[str]) -> None:
        """Raises MissingExtra for ``.parquet`` without pyarrow, ConfigError for another suffix."""
        self.path = Path(path)
        self.columns = list(columns)
        self.parquet = self.path.suffix.lower() == ".parquet"
        if self.path.suffix.lower() not in SUFFIXES:
            raise ConfigError(f"-o {str(self.path)!r}: must end in .csv or .parquet (the format follows the suffix)")
        if self.parquet:
            from edgert.extras import require  # noqa: PLC0415

            require("pyarrow.parquet", "-o F.parquet")

    def resumable(self) -> dict[str, list[dict[str, Any]]]:
        """Rows of the existing output by key, for cells that finished without an error (none: ``{}``).

        Raises:
            ConfigError: the file exists but holds other columns (another grid, or ``--per-model``
                given on one run and not the other) or cannot be read; nothing is overwritten.
        """
        if not self.path.exists() or self.path.stat().st_size == 0:
            return {}
        have, rows = self._read()
        if have != self.columns:
            extra = [c for c in have if c not in self.columns]
            missing = [c for c in self.columns if c not in have]
            what = "; ".join(x for x in (f"has {', '.join(extra)}" if extra else "",
                                         f"lacks {', '.join(missing)}" if missing else "",
                                         "" if extra or missing else "columns in another order") if x)
            raise ConfigError(f"{str(self.path)!r} holds another sweep ({what}); give another -o, "
                              "or remove the file to start over")
        by_key: dict[str, list[dict[str, Any]]] = {}
        failed = set()
        for r in rows:
            if r.get("error") not in (None, ""):
                failed.add(r["key"])
            by_key.setdefault(str(r["key"]), []).append(r)
        return {k: v for k, v in by_key.items() if k not in failed}

    def _read(self) -> tuple[list[str], list[dict[str, Any]]]:
        try:
            if self.parquet:
                import pyarrow.parquet as pq  # noqa: PLC0415

                table = pq.read_table(self.path)
                return list(table.column_names), table.to_pylist()
            with self.path.open(newline="") as fh:
                reader = csv.DictReader(fh)
                return list(reader.fieldnames or []), list(reader)
        except (OSError, ValueError, csv.Error) as exc:
            raise ConfigError(f"cannot read {str(self.path)!r} to resume it: {exc}; give another -o, or "
                              "remove the file to start over") from None

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        """Replace the output with ``rows`` (missing columns empty), atomically."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            if self.parquet:
                self._write_parquet(tmp, rows)
            else:
                with tmp.open("w", newline="") as fh:
                    w = csv.writer(fh)
                    w.writerow(self.columns)
                    w.writerows([_text(r.get(c)) for c in self.columns] for r in rows)
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)

    def _write_parquet(self, tmp: Path, rows: Sequence[dict[str, Any]]) -> None:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        cols: dict[str, Any] = {}
        for c in self.columns:
            vals = [r.get(c) for r in rows]
            kinds = {type(v) for v in vals if v is not None}
            if len(kinds) > 1 and not kinds <= {int, float}:   # e.g. burst = [false, "4:2:3"]: one type, text
                vals = [None if v is None else _text(v) for v in vals]
            cols[c] = pa.array(vals) if kinds else pa.array(vals, type=pa.string())
        pq.write_table(pa.table(cols), tmp)


def _text(v: Any) -> str:
    """A CSV field: empty for None, ``true``/``false`` for booleans, floats at full precision."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    return str(v)

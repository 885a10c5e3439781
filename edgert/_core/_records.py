"""Per-request records, kept only when the app asks (``Runtime(records=...)``), in preallocated columns.

A runtime that serves hours of requests must not keep one Python object per request: by default it
keeps none (``rt.stats()`` needs no history: :mod:`edgert._core._stats`). ``Runtime(records=True)``
keeps the latest :data:`RECORDS_DEFAULT` finished requests, ``records=N`` the latest N, for
``rt.records()``, ``rt.write_timeline()`` and plots. They go into a :class:`RecordBuffer`: one numpy
column per field of :class:`scheduler.timeline.RequestRecord`, allocated and written once when the
runtime starts, overwritten in place as a ring. Model and processor names are stored as small codes
(there are as many as models and workers); a reason's text is held only for a dropped or failed
request (every other row holds the one empty string).

The JSONL trace (``trace=``) is a file written as requests end (:mod:`edgert._core._trace`): it
keeps nothing in memory beyond the requests still open and needs no records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgert.errors import ConfigError
from scheduler.timeline import STATUSES, RequestRecord

#: Requests kept by ``Runtime(records=True)``: about 13 MB, resident from the start (about 11
#: minutes of the XR demo at one user).
RECORDS_DEFAULT = 200_000

#: One finished request as the runtime hands it over, in :class:`RequestRecord`'s field order:
#: (id, model, status, arrival_ms, deadline_ms, processor, start_ms, end_ms, frame, reason).
Row = tuple[int, str, str, float, float, str, float, float, int, str]

_STATUS_CODE = {s: i for i, s in enumerate(STATUSES)}


def records_capacity(records: Any) -> int:
    """How many requests ``Runtime(records=...)`` keeps: False / 0 / None → 0 (none, the default),
    True → :data:`RECORDS_DEFAULT`, a whole number N ≥ 0 → N.

    Raises:
        ConfigError: anything else.
    """
    if records is None or records is False:
        return 0
    if records is True:
        return RECORDS_DEFAULT
    if isinstance(records, (int, np.integer)) and records >= 0:
        return int(records)
    raise ConfigError(f"records must be True (keep the latest {RECORDS_DEFAULT}), False (keep none) or a whole "
                      f"number of requests >= 0, got {records!r}; e.g. edgert.Runtime(records=True)")


class RecordBuffer:
    """The latest ``capacity`` finished requests, in preallocated numpy columns (a ring).

    Its bytes (:attr:`nbytes`) are fixed at creation, whatever the number of requests added, except
    the reason texts of dropped and failed requests still held (at most ``capacity`` of them).

    Raises:
        ValueError: ``capacity`` < 1.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a RecordBuffer holds at least 1 record, got capacity={capacity}")
        self.capacity = capacity
        # full(), not empty(): every page is written now, so the buffer is resident from the start
        self._id = np.full(capacity, -1, np.int64)
        self._model = np.full(capacity, -1, np.int32)        # code into _names
        self._status = np.full(capacity, -1, np.int8)        # index into STATUSES
        self._processor = np.full(capacity, -1, np.int32)    # code into _names ("" too)
        self._frame = np.full(capacity, -1, np.int64)
        self._times = np.full((capacity, 4), np.nan)         # arrival, deadline, start, end (ms)
        self._reason = np.full(capacity, "", dtype=object)
        self._names: list[str] = []
        self._codes: dict[str, int] = {}
        #: records ever added (the next goes to row ``count % capacity``)
        self.count = 0

    def _code(self, name: str) -> int:
        code = self._codes.get(name)
        if code is None:
            code = self._codes[name] = len(self._names)
            self._names.append(name)
        return code

    def extend(self, rows: Iterable[Row]) -> None:
        """Add finished requests (each a :data:`Row`), overwriting the oldest once full."""
        cap = self.capacity
        for rid, model, status, arrival, deadline, proc, start, end, frame, reason in rows:
            i = self.count % cap
            self._id[i] = rid
            self._model[i] = self._code(model)
            self._status[i] = _STATUS_CODE[status]
            self._processor[i] = self._code(proc)
            self._frame[i] = frame
            self._times[i] = (arrival, deadline, start, end)
            self._reason[i] = reason
            self.count += 1

    def __len__(self) -> int:
        return min(self.count, self.capacity)

    @property
    def nbytes(self) -> int:
        """Bytes of its columns: fixed at creation (the reason texts they point to are apart)."""
        return sum(int(c.nbytes) for c in (self._id, self._model, self._status, self._processor, self._frame,
                                            self._times, self._reason))

    def held(self) -> HeldRecords:
        """A copy of the held records' columns, oldest first: cheap (numpy copies), so a caller under the
        runtime's lock takes this and builds :class:`RequestRecord` rows after releasing it."""
        n, cap = len(self), self.capacity
        idx = np.arange(n) if self.count <= cap else (np.arange(n) + self.count) % cap
        return HeldRecords(tuple(self._names), self._id[idx], self._model[idx], self._status[idx],
                           self._processor[idx], self._frame[idx], self._times[idx], self._reason[idx])

    def records(self) -> list[RequestRecord]:
        """The held records, oldest first."""
        return self.held().records()


@dataclass(frozen=True, slots=True)
class HeldRecords:
    """Copied columns of a :class:`RecordBuffer` (rows oldest first), independent of the live buffer."""

    names: tuple[str, ...]
    ids: np.ndarray
    models: np.ndarray
    statuses: np.ndarray
    processors: np.ndarray
    frames: np.ndarray
    times: np.ndarray   # [n, 4]: arrival, deadline, start, end (ms)
    reasons: np.ndarray

    def records(self) -> list[RequestRecord]:
        """One :class:`RequestRecord` per row."""
        names, statuses = self.names, STATUSES
        return [RequestRecord(rid, names[m], statuses[s], a, d, names[p], st, e, fr, why)
                for rid, m, s, p, fr, (a, d, st, e), why in zip(
                    self.ids.tolist(), self.models.tolist(), self.statuses.tolist(), self.processors.tolist(),
                    self.frames.tolist(), self.times.tolist(), self.reasons.tolist())]


__all__ = ["RECORDS_DEFAULT", "HeldRecords", "RecordBuffer", "Row", "records_capacity"]

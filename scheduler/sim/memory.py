"""Which models fit in a processor's memory: the simulator refuses a placement that would overflow it.

A device profile may give a processor's memory for models (``processors[i].memory_mb``) and each
model's resident size on it (``memory_mb[model][processor]``, :mod:`scheduler.profile`). A model
runs on a processor only while it is resident there, and a headset cannot page a model in per
request, so the workload's models are made resident up front, in the order the workload first
uses them; a model that would take a processor past its memory is refused there (with the
reason) and runs only on its other processors. A model refused everywhere it could run is an error
before the run starts, naming the sizes.

A processor without ``memory_mb`` is not limited; a model without a size on a processor takes no
memory there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.errors import TraceError
from scheduler.profile import DeviceProfile


@dataclass(frozen=True, slots=True)
class Refusal:
    """``model`` is not placed on ``processor``: ``need_mb`` more would exceed its ``capacity_mb``
    with ``used_mb`` already resident."""

    model: str
    processor: str
    need_mb: float
    used_mb: float
    capacity_mb: float

    @property
    def reason(self) -> str:
        """One line: what did not fit where, in MB."""
        return (f"{self.model} needs {self.need_mb:g} MB on {self.processor}, which has {self.capacity_mb:g} MB "
                f"for models and {self.used_mb:g} MB resident already")

    def to_json(self) -> dict[str, object]:
        """JSON-ready: model, processor, the sizes in MB and the reason."""
        return {"model": self.model, "processor": self.processor, "need_mb": self.need_mb,
                "used_mb": self.used_mb, "capacity_mb": self.capacity_mb, "reason": self.reason}


def fit_memory(profile: DeviceProfile, models: Sequence[str],
               table: dict[str, dict[str, float]]) -> list[Refusal]:
    """Make ``models`` (in first-use order) resident on the processors ``table`` lets them run on, and
    remove from ``table`` every (model, processor) pair that does not fit; returns those refusals.

    Args:
        profile: gives the capacities (``processors[i].memory_mb``) and sizes (``memory_mb``).
        models: the workload's models, in the order it first uses them.
        table: ``{model: {processor: expected ms}}``; edited in place.

    Raises:
        TraceError: a model that the refusals leave with no processor (the sizes are in the message).
    """
    capacity = {p.name: p.memory_mb for p in profile.processors if p.memory_mb is not None}
    if not capacity:
        return []
    used = dict.fromkeys(capacity, 0.0)
    refused: list[Refusal] = []
    for model in models:
        row = table.get(model, {})
        for proc in list(row):
            if proc not in capacity:
                continue
            need = profile.memory_mb.get(model, {}).get(proc, 0.0)
            if used[proc] + need > capacity[proc]:
                refused.append(Refusal(model, proc, need, used[proc], capacity[proc]))
                del row[proc]
            else:
                used[proc] += need
        if not row and any(r.model == model for r in refused):
            why = "; ".join(r.reason for r in refused if r.model == model)
            raise TraceError(f"model {model!r} fits in the memory of no processor of device profile "
                             f"{profile.name!r}: {why}; give the processor more memory_mb, or run fewer or "
                             "smaller models")
    return refused

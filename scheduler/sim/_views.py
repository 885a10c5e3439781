"""Fast builders for the frozen snapshot dataclasses the driver hands to a policy.

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__`` (it must get past the frozen ``__setattr__``): about
1.4 µs for an 8-field :class:`~scheduler.types.RequestView` on the 2-core build
host. The simulator makes one per request and one :class:`SchedulerView` per
decision, so :func:`slot_builder` makes the same objects by calling each slot's
member descriptor directly (about 0.5 µs): same class, same field values, still
frozen. Every field must be given (there are no defaults). It only applies to
a slots dataclass with no ``__post_init__`` (checked when the builder is made;
``tests/scheduler/test_sim_views.py`` checks the objects equal the constructor's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from scheduler.types import ProcessorView, RequestView, SchedulerView


def slot_builder(cls: type) -> Callable[..., Any]:
    """``build(*values)`` that returns ``cls(*values)`` for a frozen slots dataclass, every field positional.

    Raises:
        TypeError: ``cls`` is not a slots dataclass, or it has a ``__post_init__`` (its checks would be skipped).
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__; build it with its constructor")
    names = [f.name for f in dataclasses.fields(cls)]
    if sorted(names) != sorted(cls.__slots__):
        raise TypeError(f"{cls.__name__}'s slots {cls.__slots__} are not its fields {names}")
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for i, n in enumerate(names):
        env[f"_s{i}"] = cls.__dict__[n].__set__
    args = ", ".join(f"a{i}" for i in range(len(names)))
    sets = "".join(f"    _s{i}(o, a{i})\n" for i in range(len(names)))
    src = f"def build({args}):\n    o = _new(_cls)\n{sets}    return o\n"
    exec(src, env)   # noqa: S102 -- generated from the dataclass's own field names, nothing external
    fn = env["build"]
    fn.__doc__ = f"{cls.__name__}({', '.join(names)}), all positional."
    return fn


#: ``RequestView(id, model, arrival_ms, deadline_ms, stream, frame, downstream_ms, allowed)``
request_view = slot_builder(RequestView)
#: ``ProcessorView(name, kind, busy_until_ms, queued_ms, n_queued, available, slots, free_slots)``
processor_view = slot_builder(ProcessorView)
#: ``SchedulerView(pending, processors, estimator)``
scheduler_view = slot_builder(SchedulerView)

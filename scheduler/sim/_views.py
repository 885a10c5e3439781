"""Fast builders for the snapshot records the driver hands to a policy.

The records of ``scheduler.types`` are ``NamedTuple`` classes. Calling one
goes through its generated Python ``__new__`` (keyword and default handling,
≈ 0.27 µs for an 8-field :class:`~scheduler.types.RequestView` on the 2-core
build host); the simulator makes one per request and a
:class:`SchedulerView` per decision, so :func:`tuple_builder` makes the same
objects with ``tuple.__new__`` directly (≈ 0.11 µs): same class, same field
values. Every field must be given, positionally, in field order (there are no
defaults); ``tests/scheduler/test_sim_views.py`` checks the objects equal the
constructor's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler.types import ProcessorView, RequestView, SchedulerView


def tuple_builder(cls: type) -> Callable[..., Any]:
    """``build(*values)`` that returns ``cls(*values)`` for a ``NamedTuple`` class, every field positional.

    Raises:
        TypeError: ``cls`` is not a ``NamedTuple`` class.
    """
    names = getattr(cls, "_fields", None)
    if not (isinstance(cls, type) and issubclass(cls, tuple) and isinstance(names, tuple)):
        raise TypeError(f"{getattr(cls, '__name__', cls)!r} is not a NamedTuple class")
    env: dict[str, Any] = {"_new": tuple.__new__, "_cls": cls}
    args = ", ".join(f"a{i}" for i in range(len(names)))
    src = f"def build({args}):\n    return _new(_cls, ({args},))\n"
    exec(src, env)   # noqa: S102 -- generated from the class's own field count, nothing external
    fn = env["build"]
    fn.__doc__ = f"{cls.__name__}({', '.join(names)}), all positional."
    return fn


#: ``RequestView(id, model, arrival_ms, deadline_ms, stream, frame, downstream_ms, allowed, priority)``
request_view = tuple_builder(RequestView)
#: ``ProcessorView(name, kind, busy_until_ms, queued_ms, n_queued, available, slots, free_slots)``
processor_view = tuple_builder(ProcessorView)
#: ``SchedulerView(pending, processors, estimator)``
scheduler_view = tuple_builder(SchedulerView)

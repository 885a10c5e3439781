"""Where a sweep's tasks run: in this process, in local worker processes, or on a Dask cluster.

:func:`run_tasks` yields each task's :class:`Done` as it finishes, in whatever order; the caller
puts results back in grid order. Any picklable module-level function is a task (``edgert sweep``
sends :func:`~edgert.sweep._cell.run_task`; ``benchmarks/schedulers.py`` its own cell).

- ``jobs=1``: in this process, one task after the other.
- ``jobs=N``: N worker processes (``spawn``: a clean interpreter each, whatever threads this
  process runs). They ignore SIGINT: Ctrl-C reaches this process only, which stops them and
  re-raises, so the caller keeps what finished.
- ``cluster="tcp://host:port"``: the tasks go to a running Dask distributed scheduler through
  ``distributed.Client`` (``pip install 'edgert[cluster]'``). Workers there need edgert
  installed; a task carries its own inputs.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from edgert.errors import ConfigError
from scheduler.host import cores

#: URL schemes of a Dask scheduler that ``--cluster`` takes.
CLUSTER_SCHEMES: tuple[str, ...] = ("tcp://", "tls://")
#: Seconds to wait for a Dask scheduler to answer before giving up.
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True, slots=True)
class Done:
    """A finished task: its index in the submitted sequence and what it returned, or what it raised."""

    index: int
    value: Any = None
    error: BaseException | None = None


def default_jobs() -> int:
    """One worker per core this process may run on."""
    return cores()


def run_tasks(fn: Callable[[Any], Any], items: Sequence[Any], *, jobs: int | None = None,
              cluster: str | None = None) -> Iterator[Done]:
    """Run ``fn(item)`` for every item; yield a :class:`Done` as each one finishes.

    Raises:
        ConfigError: a ``cluster`` URL of another scheme, or a scheduler that does not answer.
        MissingExtra: ``cluster`` without ``distributed`` installed (names ``edgert[cluster]``).
        KeyboardInterrupt: passed on after the workers are stopped (the tasks already yielded stand).
    """
    if cluster is not None:
        return _on_dask(fn, items, cluster)
    jobs = default_jobs() if jobs is None else jobs
    if jobs <= 1 or len(items) <= 1:
        return _in_process(fn, items)
    return _on_processes(fn, items, min(jobs, len(items)))


def _in_process(fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Done]:
    for i, item in enumerate(items):
        try:
            value = fn(item)
        except Exception as exc:  # noqa: BLE001 - handed to the caller with its index
            yield Done(i, error=exc)
        else:
            yield Done(i, value)


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them (a worker interrupted mid-task would
    break the pool and lose the result of every task in flight)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _on_processes(fn: Callable[[Any], Any], items: Sequence[Any], jobs: int) -> Iterator[Done]:
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_sigint)
    finished = False
    try:
        pending: dict[Future[Any], int] = {pool.submit(fn, item): i for i, item in enumerate(items)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                i = pending.pop(f)
                exc = f.exception()
                yield Done(i, error=exc) if exc is not None else Done(i, f.result())
        finished = True
    finally:
        if not finished:   # Ctrl-C, or the caller stopped reading: stop the workers now, not after their tasks
            for p in set(multiprocessing.active_children()) - before:
                p.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def _on_dask(fn: Callable[[Any], Any], items: Sequence[Any], url: str) -> Iterator[Done]:
    if not url.startswith(CLUSTER_SCHEMES):
        raise ConfigError(f"--cluster {url!r}: give a Dask scheduler's address, e.g. tcp://host:8786")
    from edgert.extras import require  # noqa: PLC0415

    distributed = require("distributed", "--cluster")
    try:
        client = distributed.Client(url, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"--cluster {url}: no Dask scheduler answered within {CONNECT_TIMEOUT_S} s "
                          f"({type(exc).__name__}); start one with `dask scheduler` and workers with "
                          "`dask worker ADDRESS`") from None
    return _dask_results(client, distributed, fn, items)


def _dask_results(client: Any, distributed: Any, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Done]:
    futures: list[Any] = []
    try:
        futures = client.map(fn, list(items), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for f in distributed.as_completed(futures):
            i = index[f.key]
            if f.status == "error":
                yield Done(i, error=f.exception())
            else:
                yield Done(i, f.result())
            f.release()
    finally:
        if futures:
            client.cancel([f for f in futures if not f.done()])
        client.close()

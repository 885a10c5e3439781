"""The runtime core: a request's path from the model's call to its result, and loading models.

Read in the order a request walks: ``_model`` (``Model.__call__`` / ``submit``, input checks) ->
``_dispatch`` (the :class:`Dispatcher` owns the request from admission to resolution; the policy
decides, :mod:`scheduler.contract` says what its decision means) -> ``_worker`` (the queue that holds
the :class:`Request`, the delegate that runs it) -> back to ``_dispatch`` -> ``_result`` (the
:class:`edgert.Result`). ``_runtime`` is the public :class:`edgert.Runtime` (its API and model
loading, ``_loader``); ``_frame``, ``_stats``, ``_trace`` and ``_validate`` are the frame deadlines,
counters, trace lines and argument checks of that path.

Everything public is re-exported by :mod:`edgert`; the tools built on the core (``edgert.cli``,
``bench``, ``deploy``, ``testing``) live beside this package and the core never imports them
(``.importlinter``).
"""

"""The runtime core: a request's life from the model's call to its result, and loading models.

Read in the order a request lives: ``_model`` (``Model.__call__`` / ``submit``, input checks) ->
``_dispatch`` (the :class:`Dispatcher`, which :class:`edgert.Runtime` holds: admit, queue, run, in
order) -> ``_decide`` (the policy decides; :mod:`scheduler.contract` applies its decision, as in the
simulator) -> ``_worker`` (the queue that holds the :class:`Request`, the delegate that runs it) ->
``_ends`` (every request ends once, as one record) -> ``_handoff`` (which thread resolves the
:class:`edgert.Result`, ``_result``, and why). ``_runtime`` is the public :class:`edgert.Runtime` (its
API and model loading, ``_loader``); ``_frame``, ``_stats``, ``_records``, ``_trace`` and ``_validate`` are the frame
deadlines, counters (fixed memory), the records kept when asked, trace lines and argument checks of that path.

Everything public is re-exported by :mod:`edgert`; the tools built on the core (``edgert.cli``,
``bench``, ``deploy``, ``testing``) live beside this package and the core never imports them
(``.importlinter``).
"""

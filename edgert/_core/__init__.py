"""The runtime core: a request's life from the model's call to its result, and loading models.

``_run`` is a request's life, top to bottom (admit -> decide -> run -> end -> resolve, with the hand-off
between threads explained once): the :class:`Dispatcher` that :class:`edgert.Runtime` holds, its
:class:`Decider`, the :class:`Worker` queues and the :class:`Ends` record. ``_model`` is the public
:class:`edgert.Model` facade and its inputs' check; ``_result`` the :class:`edgert.Result`. ``_runtime`` is the
public :class:`edgert.Runtime` (its API and model loading, ``_loader``); ``_frame``, ``_stats``, ``_records``,
``_trace`` and ``_validate`` are the frame deadlines, counters (fixed memory), the records kept when asked,
trace lines and argument checks of that path.

Everything public is re-exported by :mod:`edgert`; the tools built on the core (``edgert.cli``,
``bench``, ``deploy``, ``testing``) live beside this package and the core never imports them
(``.importlinter``).
"""

"""One file per scheduling policy; see ``scheduler.registry`` for the names."""

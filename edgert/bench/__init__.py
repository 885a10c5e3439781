"""Measuring edgert: the MLPerf LoadGen adapter (:mod:`edgert.bench.loadgen`, ``edgert bench
loadgen``) and the one-picture plot of a run (:mod:`edgert.bench.plot`, ``--plot``)."""

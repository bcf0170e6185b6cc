"""Runs: the workloads, running and profiling them, timing them, and the recorded reference sets.

Knows how to build a workload (:mod:`.workload`, :mod:`.training`,
:mod:`.slow_loop`, :mod:`.scenarios`), run it in a fresh process
(:mod:`.runner`, :mod:`.ddp`), profile it (:mod:`.profiling`), record the
reference traces (:mod:`.record`, :mod:`.reference`, :mod:`.tags`), time it
(:mod:`.timing`, :mod:`.comparisons`, :mod:`.idle_gpu`) and which mode the
series is in (:mod:`.mode`: live on a GPU or recorded). May import
:mod:`helpers.reader`, :mod:`helpers.facts` and :mod:`helpers.advice`; never
the lesson's screens or the classroom. torch is imported inside the functions
that run something, so that recorded mode works without a GPU.
"""

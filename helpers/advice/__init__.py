"""Advice: what a trace's facts mean and what to do first.

Knows the rules (:mod:`.rulebook`, the cheat sheet's table of symptoms, causes and
fixes), the findings they produce (:mod:`.findings`), the ranking that picks the
first fix (:mod:`.diagnose`), the rules across ranks (:mod:`.distributed`, on the
facts of :mod:`helpers.facts.ranks`) and the exam's answer key (:mod:`.exam`). May
import :mod:`helpers.facts` and :mod:`helpers.reader`; never runs a workload (no :mod:`helpers.runs`) and never
draws (no :mod:`helpers.lesson`). No torch, matplotlib or ipywidgets.
"""

"""Each notebook's questions and reveals, one module per notebook (``n05_a_batch_axis`` for notebook 05).

A notebook keeps the code a learner would write (the workload, the profiler
call, the table, the plot) and one line per question, such as
``lesson.observer(tiny, gpu_tiny)``; the question's wording, its choices,
the facts that decide it and its reveal live here, so that the question
cell gives nothing away. After the learner locks in, a reveal may show how
it computed its figures (the few lines that read the trace): that is part
of the lesson.

These modules may import every other part of ``helpers``; nothing in
``helpers`` imports them.
"""

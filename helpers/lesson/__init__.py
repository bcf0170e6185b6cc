"""The lesson: what the learner sees and does in a notebook.

Knows the screens: the questions and reveals (:mod:`.widgets`, :mod:`.spoilers`),
the learner's answers (:mod:`.journal`), banners and tables (:mod:`.show`), the
figures (:mod:`.plots`, :mod:`.article`), the checkpoints against the golden
facts (:mod:`.checkpoint`), Perfetto links (:mod:`.perfetto`), Colab
(:mod:`.colab`) and the "run the cells above first" hint (:mod:`.kernel_hints`).
May import every package below it: reader, facts, advice, runs. The
per-notebook modules (``helpers/lessons/nNN_*.py``) sit on this floor too and
use these screens; the classroom sits above.
"""

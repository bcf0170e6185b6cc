"""The classroom: the instructor's and the maintainer's tools around the series.

Knows the pre-flight check that runs every notebook before a class
(:mod:`.preflight`), the room that gathers the learners' journals
(:mod:`.room`; :mod:`.journals` reads them, :mod:`.tally` counts them) and the set-up ``make lab`` writes into the environment
(:mod:`.lab_setup`). May import every other package; nothing imports it but the
command line (``python -m helpers``).
"""

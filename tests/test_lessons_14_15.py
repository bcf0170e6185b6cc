"""Notebooks 14 and 15's lesson modules, and the leak check's reading of what they show."""

from __future__ import annotations

from helpers.lesson import spoilers


def test_the_leak_check_reads_no_script():
    """A Perfetto button carries the trace as base64 inside a <script>: code the page runs, not text a learner
    reads; a ratio's short form ("2x") turns up in base64 by chance and must not count as shown."""
    page = "<button>Open in Perfetto</button><script>var DATA = 'aGVsbG8I2xhbmU=';</script><p>busy 3.4x</p>"
    text = spoilers.plain_text(page)
    assert "DATA" not in text and "Open in Perfetto" in text
    assert spoilers.found(spoilers.ratio(2.23), text) is None
    assert spoilers.found(spoilers.ratio(3.4), text) == "3.4x"


def test_15_all_reduces_take_the_place_their_launch_gives_them(h200):
    """A step's all-reduce kernels can run after its CPU span has ended: their place in the step comes from the
    CPU call that launched them, so the planted sleep shows where it acts, in the first all-reduce of each step."""
    from helpers.runs import ddp
    from helpers.lessons import n15_two_gpus as lesson

    slow = lesson.of_run(ddp.RankRun("straggler", h200 / "ddp" / "straggler", "recorded", "nccl"))
    n = len(slow.ranks.matched)
    per_step = n // 3  # three recorded steps
    assert n % 3 == 0 and lesson.positions(slow) == [k % per_step for k in range(n)]
    gaps = lesson.entry_gaps(slow)
    # in every step, rank 1 is later into the step's first all-reduce than into its last: the sleep acts at the start
    assert all(first > last for first, last in zip(gaps[0], gaps[per_step - 1]))
    assert lesson.kernels_by_place(slow.traces[0]).keys() == set(range(per_step))


def test_15_pictures_draw_without_a_warning(h200):
    """Each two-rank picture notebook 15 shows draws with no warning (issue 21: a tight_layout UserWarning under
    15's reveals is noise on a learner's screen)."""
    import io
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.runs import ddp
    from helpers.lesson import plots
    from helpers.lessons import n15_two_gpus as lesson

    for name in ddp.SCENARIOS:
        p = lesson.of_run(ddp.RankRun(name, h200 / "ddp" / name, "recorded", "nccl"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig = plots.ranks(p.traces, p.shifts, title=f"{name}: one step, both ranks")
            fig.savefig(io.BytesIO(), format="png", bbox_inches="tight")  # as the notebook shows it
        plt.close(fig)


def test_14_the_main_process_loader_leaves_the_gpu_idle_and_pinned_copies_are_faster():
    """14.busy and 14.copy on the H200 set: the busy share rests on the unprofiled steps, the copy speeds on the
    batch's image copies only (the largest host-to-device copies), pinned against pageable."""
    from helpers.lessons import n14_the_input_pipeline as n14
    from helpers.runs import comparisons
    from helpers.runs.profiling import recorded
    from helpers.runs.training import input_pipeline

    one = recorded(input_pipeline(), warm=True)
    pinned = recorded(input_pipeline(pin=True, non_blocking=True), warm=True)
    share = n14.busy_share(one, comparisons.recorded("input"))
    assert share.unit == "%" and share.n >= 5 and share.quartiles[1] < n14.BUSY_EDGES[0]  # "under 10%", conclusive
    copies = n14.batch_copies(one)
    assert copies and len({b for _, b in copies}) == 1  # one size: the batch's images, not the labels
    assert n14.copy_speeds(pinned).median > 1.5 * n14.copy_speeds(one).median

# The notebook tools/new_notebook.py writes, one cell per "# %%" (markdown cells: "# %% [markdown]", each line
# after "# "). It puts the Colab badge above the title and the Colab cell first, from helpers/lesson/colab.py.

# %% [markdown]
# # NN · TITLE
#
# What this notebook asks, in two sentences: the learner predicts, then the trace answers.

# %%
from helpers.lesson import show, widgets
from helpers.lessons import nNN_name as lesson
from helpers.runs.profiling import profile
from helpers.runs.workload import matmul_add

env = show.banner()
# Live on a GPU; without one, the reference set's recording of the same scenario (helpers/runs/scenarios.py).
run = profile(matmul_add(64), warm=True)  # five steps: wait=1, warmup=1, active=3
print(f"{run.tag}: {run.source}")

# %% [markdown]
# ## A prediction
#
# The cell above ran `add(matmul(x, w), b)` in five steps, under the profiler's schedule: one step to wait, one to
# warm up, three active ones.

# %%
lesson.mm_calls(run)

# %% [markdown]
# ## Recap
#
# * What the learner should keep from this notebook, one line a point.
#
# NEXT

# %%
widgets.scoreboard()

# %%
# NBVAL_CHECK_OUTPUT
# Regression checkpoint for CI: the facts this notebook rests on, compared with tests/golden/NN.json (one line out).
from helpers.lesson import checkpoint

checkpoint.check("NN", lambda: lesson.checkpoint_facts(run))  # gathered only where CI compares them

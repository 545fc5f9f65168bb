"""The lm-eval tasks lit_sparse ships (lit_sparse/interop/shipped_tasks.py): every task file
read, tagged and described, and each dataset it names a function of the folder's utils.py."""

from __future__ import annotations

import re

from lit_sparse.interop.lm_eval_tasks import utils
from lit_sparse.interop.shipped_tasks import TASK_TAG, TASKS_DIR, shipped_tasks


def test_every_shipped_task_carries_the_tag_and_says_what_it_measures():
    tasks = shipped_tasks()
    assert {t.output_type for t in tasks} == {
        "loglikelihood_rolling",
        "multiple_choice",
        "generate_until",
    }
    assert all(t.name.startswith(TASK_TAG) and t.description for t in tasks)
    assert [t.name for t in tasks] == sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))
    assert all("#" not in t.description and "\n" not in t.description for t in tasks)


def test_each_task_files_dataset_is_a_function_of_its_utils():
    for path in TASKS_DIR.glob("*.yaml"):
        (name,) = re.findall(r"^custom_dataset: !function utils\.(\w+)$", path.read_text(), re.M)
        assert callable(getattr(utils, name, None)), f"{path.name}: utils.{name}"

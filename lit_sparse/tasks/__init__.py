"""Tasks, registered as attention patterns are, each in one file of this package: ``synthetic``
(LightningDataModules trained on and evaluated at other lengths) and ``choice`` (forced-choice
items scored on a text model). See docs/tasks.md to add one."""

from __future__ import annotations

from lit_sparse._lazy import lazy_names

_PUBLIC = {
    **dict.fromkeys(
        ["TASKS", "Task", "get_task", "list_tasks", "register_task", "task_options"],
        "lit_sparse.tasks.registry",
    ),
    **dict.fromkeys(
        [
            "IGNORE_INDEX",
            "Examples",
            "HeldOutExamples",
            "RecallDataModule",
            "recall_data_from_config",
        ],
        "lit_sparse.tasks.synthetic",
    ),
    **dict.fromkeys(
        ["MQARDataModule", "gap_probabilities", "multiquery_ar"], "lit_sparse.tasks.mqar"
    ),
    **dict.fromkeys(
        [
            "DistanceDataModule",
            "check_pairs",
            "distance_buckets",
            "distance_pairs",
            "distance_retrieval",
        ],
        "lit_sparse.tasks.distance",
    ),
    **dict.fromkeys(
        ["PasskeyDataModule", "PasskeyTemplate", "corpus_tokens", "embedded_template", "passkey"],
        "lit_sparse.tasks.passkey_retrieval",
    ),
    **dict.fromkeys(["ProbeDataModule", "marked_shift_copy"], "lit_sparse.tasks.probe"),
    "ChoiceTask": "lit_sparse.tasks.choice",
    **dict.fromkeys(["Lego", "lego_items", "lego_value"], "lit_sparse.tasks.lego"),
    **dict.fromkeys(
        ["RulerVariableTracking", "ruler_vt_items", "value_pool"], "lit_sparse.tasks.ruler"
    ),
}
"""public name -> the module it comes from."""

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, _PUBLIC)

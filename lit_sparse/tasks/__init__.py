"""Tasks, registered as attention patterns are, each in one file of this package: ``synthetic``
(LightningDataModules trained on and evaluated at other lengths) and ``choice`` (forced-choice
items scored on a text model). See docs/tasks.md to add one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

if TYPE_CHECKING:
    from lit_sparse.tasks.choice import ChoiceTask as ChoiceTask
    from lit_sparse.tasks.distance import DistanceDataModule as DistanceDataModule
    from lit_sparse.tasks.distance import check_pairs as check_pairs
    from lit_sparse.tasks.distance import distance_buckets as distance_buckets
    from lit_sparse.tasks.distance import distance_pairs as distance_pairs
    from lit_sparse.tasks.distance import distance_retrieval as distance_retrieval
    from lit_sparse.tasks.lego import Lego as Lego
    from lit_sparse.tasks.lego import lego_items as lego_items
    from lit_sparse.tasks.lego import lego_value as lego_value
    from lit_sparse.tasks.mqar import MQARDataModule as MQARDataModule
    from lit_sparse.tasks.mqar import gap_probabilities as gap_probabilities
    from lit_sparse.tasks.mqar import multiquery_ar as multiquery_ar
    from lit_sparse.tasks.passkey_retrieval import PasskeyDataModule as PasskeyDataModule
    from lit_sparse.tasks.passkey_retrieval import PasskeyTemplate as PasskeyTemplate
    from lit_sparse.tasks.passkey_retrieval import corpus_tokens as corpus_tokens
    from lit_sparse.tasks.passkey_retrieval import embedded_template as embedded_template
    from lit_sparse.tasks.passkey_retrieval import passkey as passkey
    from lit_sparse.tasks.probe import PROBE_MODEL as PROBE_MODEL
    from lit_sparse.tasks.probe import ProbeAccuracy as ProbeAccuracy
    from lit_sparse.tasks.probe import ProbeDataModule as ProbeDataModule
    from lit_sparse.tasks.probe import ProbeModule as ProbeModule
    from lit_sparse.tasks.probe import ProbeScores as ProbeScores
    from lit_sparse.tasks.probe import marked_shift_copy as marked_shift_copy
    from lit_sparse.tasks.probe import probe_counts as probe_counts
    from lit_sparse.tasks.registry import TASKS as TASKS
    from lit_sparse.tasks.registry import Task as Task
    from lit_sparse.tasks.registry import get_task as get_task
    from lit_sparse.tasks.registry import list_tasks as list_tasks
    from lit_sparse.tasks.registry import register_task as register_task
    from lit_sparse.tasks.registry import task_options as task_options
    from lit_sparse.tasks.ruler import RulerVariableTracking as RulerVariableTracking
    from lit_sparse.tasks.ruler import ruler_vt_items as ruler_vt_items
    from lit_sparse.tasks.ruler import value_pool as value_pool
    from lit_sparse.tasks.synthetic import IGNORE_INDEX as IGNORE_INDEX
    from lit_sparse.tasks.synthetic import Examples as Examples
    from lit_sparse.tasks.synthetic import HeldOutExamples as HeldOutExamples
    from lit_sparse.tasks.synthetic import RecallDataModule as RecallDataModule
    from lit_sparse.tasks.synthetic import recall_data_from_config as recall_data_from_config

__getattr__, __dir__, __all__ = lazy_names(__name__)

"""Forced-choice scoring of text tasks (LEGO, RULER variable tracking) on a language model.

The model's answer is the candidate with the highest total log-probability after the prompt.
Reported per task and group: accuracy, the chance rate (mean of 1 / candidates) and the "same
answer" share (1.0: the same answer whatever the prompt, which scores exactly chance)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from lit_sparse.evaluation.extrapolation import evaluating
from lit_sparse.io.tables import markdown_table

Encode = Callable[[str], list[int]]


@dataclass(frozen=True)
class ChoiceItem:
    """One forced-choice question."""

    prompt: str
    choices: tuple[str, ...]
    """Candidate answers as they continue the prompt (e.g. " +1")."""
    answer: int
    """Index of the right candidate."""
    group: int
    """The difficulty it belongs to (LEGO chain length, RULER hops)."""


def _device(model: nn.Module) -> torch.device:
    parameter = next(iter(model.parameters()), None)
    return torch.device("cpu") if parameter is None else parameter.device


def choose(
    model: nn.Module, encode: Encode, items: Sequence[ChoiceItem], batch_size: int = 64
) -> list[int]:
    """Per item, the index of the candidate ``model`` rates most likely (ties: the first)."""
    sequences: list[tuple[int, int, list[int], int]] = []  # (item, choice, ids, prompt length)
    for index, item in enumerate(items):
        prompt = encode(item.prompt)
        if not prompt:
            raise ValueError(f"item {index}: the prompt encodes to no tokens")
        for choice, text in enumerate(item.choices):
            answer = encode(text)
            if not answer:
                raise ValueError(f"item {index}: candidate {text!r} encodes to no tokens")
            sequences.append((index, choice, prompt + answer, len(prompt)))
    scores = torch.full((len(items), max(len(i.choices) for i in items)), float("-inf"))
    device = _device(model)
    order = sorted(range(len(sequences)), key=lambda s: len(sequences[s][2]))
    with evaluating(model):
        for start in range(0, len(order), batch_size):
            chunk = [sequences[s] for s in order[start : start + batch_size]]
            batch = pad_sequence([torch.tensor(ids) for _, _, ids, _ in chunk], batch_first=True)
            logits = model(batch.to(device))  # (B, T, V)
            for row, (item, choice, ids, n_prompt) in enumerate(chunk):
                targets = torch.tensor(ids[n_prompt:], device=logits.device)
                steps = logits[row, n_prompt - 1 : len(ids) - 1].float()  # predict targets
                logprobs = F.log_softmax(steps, dim=-1).gather(-1, targets[:, None])
                scores[item, choice] = logprobs.sum().cpu()
    return scores.argmax(dim=-1).tolist()


@dataclass
class TaskResult:
    """Forced-choice results of one task."""

    task: str
    group_label: str
    """What the groups are (``chain length``, ``hops``)."""
    items: int
    accuracy: float
    chance: float
    same_answer: float
    """Share of items answered with the most common answer."""
    most_common: str
    groups: dict[int, dict[str, Any]] = field(default_factory=dict)
    """group -> {items, accuracy, chance, same_answer}."""

    def metrics(self, prefix: str = "tasks") -> dict[str, float]:
        out = {
            f"{prefix}/{self.task}/accuracy": self.accuracy,
            f"{prefix}/{self.task}/chance": self.chance,
            f"{prefix}/{self.task}/same_answer": self.same_answer,
        }
        for group, values in self.groups.items():
            out[f"{prefix}/{self.task}/accuracy_{group}"] = values["accuracy"]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "groups": {str(k): v for k, v in self.groups.items()}}


def _summary(items: Sequence[ChoiceItem], chosen: Sequence[int]) -> dict[str, Any]:
    answers = Counter(item.choices[c] for item, c in zip(items, chosen, strict=True))
    most_common, count = answers.most_common(1)[0]
    right = sum(c == item.answer for item, c in zip(items, chosen, strict=True))
    return {
        "items": len(items),
        "accuracy": right / len(items),
        "chance": sum(1 / len(item.choices) for item in items) / len(items),
        "same_answer": count / len(items),
        "most_common": most_common,
    }


def score_task(
    task: str,
    group_label: str,
    model: nn.Module,
    encode: Encode,
    items: Sequence[ChoiceItem],
    batch_size: int = 64,
) -> TaskResult:
    """Answer every item with ``model`` and summarise (see the module doc)."""
    if not items:
        raise ValueError(f"{task}: no items to score")
    chosen = choose(model, encode, items, batch_size)
    total = _summary(items, chosen)
    groups = {}
    for group in sorted({item.group for item in items}):
        members = [(i, c) for i, c in zip(items, chosen, strict=True) if i.group == group]
        groups[group] = _summary(*zip(*members, strict=True))
        del groups[group]["most_common"]
    return TaskResult(task=task, group_label=group_label, groups=groups, **total)


def results_table(results: Sequence[TaskResult]) -> str:
    """A Markdown table: every task, its groups and the total."""
    rows = []
    for result in results:
        for group, values in result.groups.items():
            rows.append(
                [result.task, f"{result.group_label} {group}", str(values["items"])]
                + [f"{values['accuracy']:.4f}", f"{values['chance']:.4f}"]
                + [f"{values['same_answer']:.3f}"]
            )
        rows.append(
            [result.task, "all", str(result.items), f"{result.accuracy:.4f}"]
            + [f"{result.chance:.4f}"]
            + [f"{result.same_answer:.3f} (most common: {result.most_common.strip()!r})"]
        )
    header = ["task", "group", "items", "accuracy", "chance", "same answer"]
    return markdown_table(header, rows)

"""Evaluation items of the embedded corpus's held-out split, for lit_sparse's lm-eval tasks: whole
documents (:func:`held_out_documents`) and integer-answer math problems (:func:`math_items`)."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from lit_sparse.data.embedded import EMBEDDED_SOURCES, read_records
from lit_sparse.errors import ConfigError

CHOICE_OFFSETS = (-10, -2, -1, 1, 2, 10)
"""The distractors of the multiple choice: three of these added to the answer."""

_INTEGER = re.compile(r"-?\d+")
_VARIABLE = re.compile(r"[a-z] = (-?\d+)")
_FINAL = re.compile(r" (The answer is|So the answer is|Answer:|Therefore the result is) (.+)\.$")


def held_out_documents(name: str) -> list[dict[str, Any]]:
    """Corpus ``name``'s held-out documents in stream order: ``text`` (and the plays' ``title``)."""
    if name not in EMBEDDED_SOURCES:
        raise ConfigError(f"name={name!r}: allowed: {', '.join(EMBEDDED_SOURCES)}")
    keep = ("title", "text") if name == "shakespeare" else ("kind", "text")
    return [{k: r[k] for k in keep if k in r} for r in read_records(name, split="val")]


def _integer_answer(answer: str) -> int | None:
    """The answer's one integer (``42``, ``n = -3``), or None (fractions, pairs, roots)."""
    if _INTEGER.fullmatch(answer):
        return int(answer)
    match = _VARIABLE.fullmatch(answer)
    return int(match.group(1)) if match else None


def _choices(value: int, key: str) -> tuple[list[str], int]:
    """The answer and three nearby numbers, shuffled by ``key``, and the answer's index."""
    rng = random.Random(hashlib.sha256(key.encode("utf-8")).digest())
    numbers = [value] + [value + d for d in rng.sample(CHOICE_OFFSETS, 3)]
    rng.shuffle(numbers)
    return [str(n) for n in numbers], numbers.index(value)


def _split(text: str) -> tuple[str, str, str] | None:
    """(question line, solution label, worked solution without its final sentence)."""
    question, newline, solution = text.partition("\n")
    label, colon, body = solution.partition(":")
    final = _FINAL.search(body)
    if not (newline and colon and final):
        return None
    return question, label + colon, body[: final.start()]


def math_items() -> list[dict[str, Any]]:
    r"""The held-out math problems with a one-integer answer, in corpus order: ``prompt``
    (``Q: ...\nA:``), ``answer``, ``kind``, and a multiple choice cut just before the answer in
    the worked solution: ``choice_context``, ``choices`` and ``label`` (all None without one)."""
    items = []
    for record in read_records("math", split="val"):
        value = _integer_answer(record["answer"])
        parts = _split(record["text"])
        if value is None or parts is None:
            continue
        question, label, body = parts
        # the answer's last appearance in the worked solution, after a space (the context
        # then ends where a number is written: "... 629 - 69 =")
        found = list(re.finditer(rf"(?<= ){re.escape(str(value))}(?![\d/])", body))
        item = {
            "kind": record["kind"],
            "prompt": f"{question}\n{label}",
            "answer": str(value),
            "choice_context": None,
            "choices": None,
            "label": None,
        }
        if found:
            choices, gold = _choices(value, record["text"])
            context = f"{question}\n{label}{body[: found[-1].start() - 1]}"
            item.update(choice_context=context, choices=choices, label=gold)
        items.append(item)
    return items

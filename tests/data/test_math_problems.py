"""The synthetic math generator: deterministic, varied, and every solution correct."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest

from corpus_tools.build import MATH_PROBLEMS, MATH_SEED, math_records, math_split
from corpus_tools.math_problems import KINDS, generate
from lit_sparse.data.embedded import read_records

N = 3000


@pytest.fixture(scope="module")
def problems():
    return generate(7, N)


def test_deterministic_per_seed():
    a, b, c = generate(11, 200), generate(11, 200), generate(12, 200)
    assert a == b
    assert [p.text for p in a] != [p.text for p in c]
    # a prefix of a longer stream is the shorter stream
    assert generate(11, 50) == a[:50]


def test_variety(problems):
    kinds = {p.kind for p in problems}
    assert kinds == set(KINDS)
    labels = {p.text.split(" ", 1)[0] for p in problems}
    assert len(labels) >= 4
    assert len({p.question for p in problems}) > 0.9 * len(problems)


# ---------------------------------------------------------------- independent checking
def _ev(expr: str) -> Fraction:
    """Exact value of an arithmetic expression of integers, + - * / ^ and parentheses."""
    if not re.fullmatch(r"[\d\s+\-*/^()]+", expr):
        raise ValueError(expr)
    py = re.sub(r"\d+", lambda m: f"Fraction({m.group()})", expr.replace("^", "**"))
    return eval(py, {"__builtins__": {}, "Fraction": Fraction})  # noqa: S307 (checked above)


_NUM = r"(?:\(-?\d+\)|-?\d+(?:/\d+)?(?:\^\d+)?(?![\w()]))"
_EXPR = rf"{_NUM}(?: [-+*/] {_NUM})*"
# a chain "e1 = e2 = ..." of purely numeric expressions, not the tail of a term like "8x + 6"
_CHAIN = re.compile(rf"(?<![\w)^/(])(?<![-+*/] ){_EXPR}(?: = {_EXPR})+")


def numeric_claims(solution: str) -> list[list[str]]:
    return [m.group().split(" = ") for m in _CHAIN.finditer(solution)]


def _ints(pattern: str, text: str) -> list[int]:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in {text!r}"
    return [int(g) if g is not None and re.fullmatch(r"-?\d+", g) else g for g in m.groups()]


def expected_answer(kind: str, q: str) -> str:
    """The answer computed from the question text alone."""
    if kind == "add_sub":
        a, b, op, c = _ints(r"(\d+) \+ (\d+) ([+-]) (\d+)", q)
        return str(a + b + c if op == "+" else a + b - c)
    if kind == "multiply":
        a, b = _ints(r"(\d+)(?: \* | by )(\d+)", q)
        return str(a * b)
    if kind == "divide":
        a, b = _ints(r"(\d+)(?: / | by )(\d+)", q)
        assert a % b == 0
        return str(a // b)
    if kind == "order_of_ops":
        a, op1, b, c, op2, d = _ints(r"\((\d+) ([+-]) (\d+)\) \* (\d+) ([+-]) (\d+)", q)
        inner = a + b if op1 == "+" else a - b
        return str(inner * c + (d if op2 == "+" else -d))
    if kind == "linear":
        a, v, op, b, c = _ints(r"(\d+)([a-z]) ([+-]) (\d+) = (-?\d+)", q)
        x = Fraction(c - (b if op == "+" else -b), a)
        return f"{v} = {x}"
    if kind == "linear_both_sides":
        a, v, b, c, v2, op, d = _ints(r"(\d+)([a-z]) \+ (\d+) = (\d*)([a-z]) ([+-]) (\d+)", q)
        c = int(c) if c else 1
        d = d if op == "+" else -d
        assert v == v2
        return f"{v} = {Fraction(d - b, a - c)}"
    if kind == "system":
        s, d = _ints(r"x \+ y = (-?\d+) and x - y = (-?\d+)", q)
        return f"x = {Fraction(s + d, 2)}, y = {Fraction(s - d, 2)}"
    if kind == "quadratic":
        m = re.search(r"x\^2(?: ([+-]) (\d*)x)?(?: ([+-]) (\d+))? = 0", q)
        b = 0 if m.group(1) is None else (int(m.group(2) or 1) * (1 if m.group(1) == "+" else -1))
        c = 0 if m.group(3) is None else int(m.group(4)) * (1 if m.group(3) == "+" else -1)
        disc = b * b - 4 * c
        r = math.isqrt(disc)
        assert r * r == disc
        r1, r2 = sorted(((-b - r) // 2, (-b + r) // 2))
        return f"x = {r1} or x = {r2}"
    if kind == "fraction":
        if q.startswith("Subtract"):
            c, d, a, b = _ints(r"(\d+)/(\d+) from (\d+)/(\d+)", q)
            return _frac(Fraction(a, b) - Fraction(c, d))
        a, b, op, c, d = _ints(r"(\d+)/(\d+)(?: and | ([+-]) )(\d+)/(\d+)", q)
        left, right = Fraction(a, b), Fraction(c, d)
        return _frac(left - right if op == "-" else left + right)
    if kind == "percent":
        p, base = _ints(r"(\d+)(?:%| percent) of (\d+)", q)
        return str(Fraction(p * base, 100))
    if kind in ("gcd", "lcm"):
        a, b = _ints(r"(\d+)(?:, | and )(\d+)", q)
        return str(math.gcd(a, b) if kind == "gcd" else math.lcm(a, b))
    if kind == "power":
        a, b = _ints(r"(\d+)\^(\d+)", q)
        return str(a**b)
    if kind == "remainder":
        n, d = _ints(r"(\d+)(?: is divided by | mod )(\d+)", q)
        return str(n % d)
    if kind == "evaluate":
        c1, v1, c2, v2 = _ints(r"(\d+)([a-z]) \+ (\d+)([a-z])", q)
        values = dict(re.findall(r"\b([a-z]) = (-?\d+)", q))
        return str(c1 * int(values[v1]) + c2 * int(values[v2]))
    if kind == "word_shop":
        n, price, extra = _ints(r"buys (\d+) \w+ at (\d+) dollars each and one \w+ for (\d+)", q)
        return str(n * price + extra)
    if kind == "word_speed":
        s, h = _ints(r"at (\d+) km per hour for (\d+) hours", q)
        return str(s * h)
    if kind == "word_share":
        total, k = _ints(r"(\d+) \w+ are shared equally among (\d+) children", q)
        assert total % k == 0
        return str(total // k)
    raise AssertionError(f"no checker for kind {kind!r}")


def _frac(f: Fraction) -> str:
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def test_answers_are_correct(problems):
    for p in problems:
        assert p.answer == expected_answer(p.kind, p.question), p.text
        assert p.solution.endswith(f"{p.answer}."), p.text
        assert p.text.endswith(p.solution) and p.question in p.text


def test_every_numeric_step_holds(problems):
    checked = 0
    for p in problems:
        for chain in numeric_claims(p.solution):
            values = [_ev(e) for e in chain]
            assert len(set(values)) == 1, f"{' = '.join(chain)} in {p.text!r}"
            checked += 1
    assert checked > 1.5 * len(problems)  # the checker is not vacuous


def test_claim_checker_catches_an_error():
    assert numeric_claims("so 3x = 20 - 5 = 15 and 8x + 6 = -82.") == [["20 - 5", "15"]]
    chain = numeric_claims("Then 19 * 3 = 56.")[0]
    assert len({_ev(e) for e in chain}) == 2


def test_embedded_math_corpus_is_reproducible_and_disjoint():
    stored = read_records("math")
    assert len(stored) == MATH_PROBLEMS
    regenerated = math_records(MATH_SEED, 500)
    assert stored[:500] == regenerated
    questions = {"train": set(), "val": set()}
    for r in stored:
        q = r["text"].split("\n", 1)[0].split(" ", 1)[1]
        assert r["split"] == math_split(q)
        questions[r["split"]].add(q)
    assert not questions["train"] & questions["val"]
    assert 0.05 < len(questions["val"]) / len(stored) < 0.15

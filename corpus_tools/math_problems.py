"""Deterministic synthetic math: worked arithmetic and algebra problems with solutions.

Each problem is drawn from a kind-specific generator that picks numbers first and builds
the question around a known answer, so every solution is correct by construction (and the
tests re-check them independently). The phrasing varies (labels, question wording, final
sentence) so the corpus is not one template repeated.

``generate(seed, n)`` is a pure function of its arguments: it uses its own
``random.Random(seed)``, whose integer methods are stable across Python versions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["KINDS", "MathProblem", "generate", "iter_problems"]


@dataclass(frozen=True)
class MathProblem:
    """One worked problem."""

    kind: str
    """Generator that made it (one of ``KINDS``)."""
    question: str
    """The problem statement, without a label."""
    solution: str
    """Worked solution, ending with the final answer."""
    answer: str
    """Final answer as it ends the solution (e.g. ``5``, ``3/2``, ``x = 7, y = 3``)."""
    text: str
    """The document: labelled question and solution, as stored in the corpus."""


_LABELS = (
    ("Problem:", "Solution:"),
    ("Question:", "Answer:"),
    ("Q:", "A:"),
    ("Exercise:", "Worked solution:"),
    ("Task:", "Solution:"),
)
_NAMES = (
    "Maya",
    "Omar",
    "Lena",
    "Ravi",
    "Sofia",
    "Tom",
    "Aiko",
    "Jonas",
    "Priya",
    "Leo",
    "Nadia",
    "Ben",
    "Chloe",
    "Diego",
    "Emma",
    "Felix",
)
_ITEMS = (
    ("notebook", "notebooks"),
    ("pen", "pens"),
    ("apple", "apples"),
    ("ticket", "tickets"),
    ("book", "books"),
    ("candle", "candles"),
    ("card", "cards"),
    ("mug", "mugs"),
    ("plant", "plants"),
)
_VARS = ("x", "y", "n", "a", "t", "k")


def _final(rng: random.Random, answer: str) -> str:
    return rng.choice(
        (
            f"The answer is {answer}.",
            f"So the answer is {answer}.",
            f"Answer: {answer}.",
            f"Therefore the result is {answer}.",
        )
    )


def _num(v: int) -> str:
    """A number as it appears inside an expression: negatives in parentheses."""
    return f"({v})" if v < 0 else str(v)


def _frac(f: Fraction) -> str:
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


# Each generator returns (question, solution_without_final_sentence, answer).
def _add_sub(rng: random.Random) -> tuple[str, str, str]:
    a, b, c = rng.randint(10, 999), rng.randint(10, 999), rng.randint(1, 500)
    op2 = rng.choice("+-")
    s1 = a + b
    s2 = s1 + c if op2 == "+" else s1 - c
    expr = f"{a} + {b} {op2} {c}"
    q = rng.choice((f"Compute {expr}.", f"What is {expr}?", f"Calculate {expr}."))
    sol = f"Work from left to right. {a} + {b} = {s1}. Then {s1} {op2} {c} = {s2}."
    return q, sol, str(s2)


def _multiply(rng: random.Random) -> tuple[str, str, str]:
    a, b = rng.randint(12, 99), rng.randint(12, 99)
    tens, ones = b - b % 10, b % 10
    q = rng.choice((f"What is {a} * {b}?", f"Compute {a} * {b}.", f"Multiply {a} by {b}."))
    if ones == 0:
        sol = f"{a} * {b} = {a * b}."
    else:
        sol = (
            f"Split {b} into {tens} + {ones}: {a} * {b} = {a} * {tens} + {a} * {ones}"
            f" = {a * tens} + {a * ones} = {a * b}."
        )
    return q, sol, str(a * b)


def _divide(rng: random.Random) -> tuple[str, str, str]:
    b, c = rng.randint(2, 25), rng.randint(2, 60)
    a = b * c
    q = rng.choice((f"Divide {a} by {b}.", f"What is {a} / {b}?", f"Compute {a} / {b}."))
    sol = f"Since {b} * {c} = {a}, we get {a} / {b} = {c}."
    return q, sol, str(c)


def _order_of_ops(rng: random.Random) -> tuple[str, str, str]:
    a, b, c, d = (rng.randint(2, 30), rng.randint(2, 30), rng.randint(2, 9), rng.randint(1, 40))
    op1, op3 = rng.choice("+-"), rng.choice("+-")
    inner = a + b if op1 == "+" else a - b
    prod = inner * c
    res = prod + d if op3 == "+" else prod - d
    expr = f"({a} {op1} {b}) * {c} {op3} {d}"
    q = rng.choice((f"Evaluate {expr}.", f"Compute {expr}.", f"What is {expr}?"))
    sol = (
        f"First the parentheses: {a} {op1} {b} = {inner}. Then the product:"
        f" {_num(inner)} * {c} = {prod}. Finally {_num(prod)} {op3} {d} = {res}."
    )
    return q, sol, str(res)


def _linear(rng: random.Random) -> tuple[str, str, str]:
    v = rng.choice(_VARS)
    a, x = rng.randint(2, 12), rng.randint(-20, 30)
    b = rng.choice([i for i in range(-50, 51) if i != 0])
    c = a * x + b
    lhs = f"{a}{v} + {b}" if b > 0 else f"{a}{v} - {-b}"
    q = rng.choice(
        (f"Solve {lhs} = {c}.", f"Find {v} if {lhs} = {c}.", f"Solve for {v}: {lhs} = {c}.")
    )
    if b > 0:
        step = f"Subtract {b} from both sides: {a}{v} = {c} - {b} = {c - b}."
    else:
        step = f"Add {-b} to both sides: {a}{v} = {c} + {-b} = {c - b}."
    sol = f"{step} Divide both sides by {a}: {v} = {c - b} / {a} = {x}."
    return q, sol, f"{v} = {x}"


def _term(coef: int, v: str) -> str:
    """``3x``, or ``x`` for a coefficient of one."""
    return v if coef == 1 else f"{coef}{v}"


def _linear_both_sides(rng: random.Random) -> tuple[str, str, str]:
    v = rng.choice(_VARS)
    c = rng.randint(1, 9)
    a = c + rng.randint(1, 9)
    x = rng.randint(-15, 20)
    b = rng.randint(1, 40)
    d = (a - c) * x + b
    k = a - c
    cv, kv = _term(c, v), _term(k, v)
    rhs = f"{cv} + {d}" if d >= 0 else f"{cv} - {-d}"
    q = rng.choice((f"Solve {a}{v} + {b} = {rhs}.", f"Find {v} such that {a}{v} + {b} = {rhs}."))
    sol = (
        f"Subtract {cv} from both sides: {kv} + {b} = {d}. Subtract {b}:"
        f" {kv} = {d} - {b} = {d - b}."
    )
    if k == 1:
        sol += f" So {v} = {x}."
    else:
        sol += f" Divide by {k}: {v} = {d - b} / {k} = {x}."
    return q, sol, f"{v} = {x}"


def _system(rng: random.Random) -> tuple[str, str, str]:
    x, y = rng.randint(-10, 25), rng.randint(-10, 25)
    s, d = x + y, x - y
    q = rng.choice(
        (
            f"Solve the system x + y = {s} and x - y = {d}.",
            f"Find x and y if x + y = {s} and x - y = {d}.",
        )
    )
    sol = (
        f"Adding the two equations gives 2x = {s} + {_num(d)} = {s + d}, so"
        f" x = {s + d} / 2 = {x}. Then y = {s} - {_num(x)} = {y}."
    )
    return q, sol, f"x = {x}, y = {y}"


def _poly(b: int, c: int, v: str = "x") -> str:
    out = f"{v}^2"
    if b:
        out += f" {'+' if b > 0 else '-'} {'' if abs(b) == 1 else abs(b)}{v}"
    if c:
        out += f" {'+' if c > 0 else '-'} {abs(c)}"
    return out


def _factor(r: int, v: str = "x") -> str:
    return f"({v} - {r})" if r > 0 else (f"({v} + {-r})" if r < 0 else v)


def _quadratic(rng: random.Random) -> tuple[str, str, str]:
    r1, r2 = sorted((rng.randint(-12, 12), rng.randint(-12, 12)))
    if r1 == r2:
        r2 += 1
    b, c = -(r1 + r2), r1 * r2
    # a zero root's factor is a bare "x": write it first, "x(x - 3)"
    factored = _factor(r2) + _factor(r1) if r2 == 0 else _factor(r1) + _factor(r2)
    q = rng.choice((f"Solve {_poly(b, c)} = 0.", f"Find the roots of {_poly(b, c)} = 0."))
    sol = (
        f"We need two numbers whose product is {c} and whose sum is {-b}: {r1} and {r2},"
        f" since {_num(r1)} * {_num(r2)} = {c} and {_num(r1)} + {_num(r2)} = {-b}."
        f" So {factored} = 0, and x = {r1} or x = {r2}."
    )
    return q, sol, f"x = {r1} or x = {r2}"


def _fraction_add(rng: random.Random) -> tuple[str, str, str]:
    b, d = rng.randint(2, 12), rng.randint(2, 12)
    a, c = rng.randint(1, b * 2), rng.randint(1, d * 2)
    op = rng.choice("+-")
    lcm = b * d // math.gcd(b, d)
    a2, c2 = a * (lcm // b), c * (lcm // d)
    num = a2 + c2 if op == "+" else a2 - c2
    res = Fraction(num, lcm)
    verb = "Add" if op == "+" else "Subtract"
    q = f"{verb} {a}/{b} and {c}/{d}." if op == "+" else f"{verb} {c}/{d} from {a}/{b}."
    q = rng.choice((q, f"Compute {a}/{b} {op} {c}/{d}."))
    sol = (
        f"The common denominator is {lcm}. {a}/{b} = {a2}/{lcm} and {c}/{d} = {c2}/{lcm},"
        f" so {a2}/{lcm} {op} {c2}/{lcm} = {num}/{lcm}"
    )
    ans = _frac(res)
    sol += "." if ans == f"{num}/{lcm}" else f" = {ans}."
    return q, sol, ans


def _percent(rng: random.Random) -> tuple[str, str, str]:
    p = rng.choice((5, 10, 15, 20, 25, 30, 40, 50, 60, 75, 80))
    base = rng.randint(1, 40) * 20
    res = p * base // 100
    q = rng.choice(
        (f"What is {p}% of {base}?", f"Compute {p} percent of {base}.", f"Find {p}% of {base}.")
    )
    sol = f"{p}% of {base} is {p} / 100 * {base} = {res}."
    return q, sol, str(res)


def _gcd(rng: random.Random) -> tuple[str, str, str]:
    g = rng.randint(2, 20)
    a, b = g * rng.randint(2, 30), g * rng.randint(2, 30)
    if a < b:
        a, b = b, a
    if a == b:
        a += g
    q = rng.choice((f"Find the greatest common divisor of {a} and {b}.", f"What is gcd({a}, {b})?"))
    steps, x, y = [], a, b
    while y:
        steps.append(f"{x} = {x // y} * {y} + {x % y}.")
        x, y = y, x % y
    sol = (
        "Use the Euclidean algorithm. "
        + " ".join(steps)
        + f" The last nonzero remainder is {x}, so gcd({a}, {b}) = {x}."
    )
    return q, sol, str(x)


def _lcm(rng: random.Random) -> tuple[str, str, str]:
    a, b = rng.randint(2, 40), rng.randint(2, 40)
    g = math.gcd(a, b)
    lcm = a * b // g
    q = rng.choice((f"Find the least common multiple of {a} and {b}.", f"What is lcm({a}, {b})?"))
    sol = f"First gcd({a}, {b}) = {g}. Then lcm({a}, {b}) = {a} * {b} / {g} = {lcm}."
    return q, sol, str(lcm)


def _power(rng: random.Random) -> tuple[str, str, str]:
    base, exp = rng.randint(2, 9), rng.randint(2, 5)
    q = rng.choice((f"Compute {base}^{exp}.", f"What is {base}^{exp}?"))
    sol = f"{base}^{exp} = {' * '.join([str(base)] * exp)} = {base**exp}."
    return q, sol, str(base**exp)


def _remainder(rng: random.Random) -> tuple[str, str, str]:
    d = rng.randint(3, 19)
    n = rng.randint(d + 1, 999)
    q = rng.choice((f"What is the remainder when {n} is divided by {d}?", f"Find {n} mod {d}."))
    sol = f"{n} = {n // d} * {d} + {n % d}, so the remainder is {n % d}."
    return q, sol, str(n % d)


def _evaluate(rng: random.Random) -> tuple[str, str, str]:
    v1, v2 = rng.sample(("a", "b", "m", "n", "p", "q"), 2)
    c1, c2 = rng.randint(2, 9), rng.randint(2, 9)
    x1, x2 = rng.randint(-9, 12), rng.randint(-9, 12)
    t1, t2 = c1 * x1, c2 * x2
    res = t1 + t2
    q = rng.choice(
        (
            f"Evaluate {c1}{v1} + {c2}{v2} when {v1} = {x1} and {v2} = {x2}.",
            f"If {v1} = {x1} and {v2} = {x2}, what is {c1}{v1} + {c2}{v2}?",
        )
    )
    sol = (
        f"Substitute: {c1}{v1} + {c2}{v2} = {c1} * {_num(x1)} + {c2} * {_num(x2)}"
        f" = {t1} + {_num(t2)} = {res}."
    )
    return q, sol, str(res)


def _word_shop(rng: random.Random) -> tuple[str, str, str]:
    name = rng.choice(_NAMES)
    (one, many), (one2, _) = rng.sample(_ITEMS, 2)
    n, price, extra = rng.randint(2, 12), rng.randint(2, 15), rng.randint(1, 20)
    total = n * price + extra
    q = (
        f"{name} buys {n} {many} at {price} dollars each and one {one2} for {extra} dollars."
        f" How much does {name} spend in total?"
    )
    sol = (
        f"The {many} cost {n} * {price} = {n * price} dollars. Adding the {one2}:"
        f" {n * price} + {extra} = {total} dollars."
    )
    return q, sol, str(total)


def _word_speed(rng: random.Random) -> tuple[str, str, str]:
    speed, hours = rng.randint(3, 120), rng.randint(2, 9)
    what = rng.choice(("A train", "A cyclist", "A car", "A boat", "A runner"))
    q = f"{what} travels at {speed} km per hour for {hours} hours. How far does it go?"
    sol = f"Distance is speed times time: {speed} * {hours} = {speed * hours} km."
    return q, sol, str(speed * hours)


def _word_share(rng: random.Random) -> tuple[str, str, str]:
    (one, many) = rng.choice(_ITEMS)
    k, each = rng.randint(2, 12), rng.randint(2, 20)
    total = k * each
    q = (
        f"{total} {many} are shared equally among {k} children."
        f" How many {many} does each child get?"
    )
    sol = f"Each child gets {total} / {k} = {each} {many if each != 1 else one}."
    return q, sol, str(each)


_GENERATORS: dict[str, Callable[[random.Random], tuple[str, str, str]]] = {
    "add_sub": _add_sub,
    "multiply": _multiply,
    "divide": _divide,
    "order_of_ops": _order_of_ops,
    "linear": _linear,
    "linear_both_sides": _linear_both_sides,
    "system": _system,
    "quadratic": _quadratic,
    "fraction": _fraction_add,
    "percent": _percent,
    "gcd": _gcd,
    "lcm": _lcm,
    "power": _power,
    "remainder": _remainder,
    "evaluate": _evaluate,
    "word_shop": _word_shop,
    "word_speed": _word_speed,
    "word_share": _word_share,
}
KINDS: tuple[str, ...] = tuple(_GENERATORS)


def iter_problems(seed: int) -> Iterator[MathProblem]:
    """An endless, deterministic stream of problems for ``seed``."""
    rng = random.Random(seed)
    while True:
        kind = rng.choice(KINDS)
        question, solution, answer = _GENERATORS[kind](rng)
        solution = f"{solution} {_final(rng, answer)}"
        q_label, s_label = rng.choice(_LABELS)
        text = f"{q_label} {question}\n{s_label} {solution}"
        yield MathProblem(kind, question, solution, answer, text)


def generate(seed: int, n: int) -> list[MathProblem]:
    """The first ``n`` problems of the stream for ``seed``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    out = []
    for problem in iter_problems(seed):
        if len(out) == n:
            break
        out.append(problem)
    return out

"""The rule for values written on another machine (CONTRIBUTING.md, ``stored_values``): a test
that compares with a tensor read from a file is marked ``stored_values`` and compares with a
tolerance, since another CPU sums floats in another order; bit for bit stays for two values of
one process. Read from the tests' source, it sees a load inside the comparison or a module
constant loaded from a file (``EXPORTS = torch.load(...)``); a value passed through a local
name, or a record's number, is its author's to mark."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOADS = {"load", "load_file", "safe_open", "loadtxt", "fromfile"}  # torch, np, safetensors
CLOSE = {"assert_close", "assert_allclose", "allclose", "isclose", "approx"}
EQUAL = {"equal", "array_equal"}


def _name(node: ast.AST) -> str:
    """The last name of a call's function (``torch.testing.assert_close`` -> assert_close)."""
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _reads_a_file(node: ast.AST, loaded: set[str]) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and _name(inner.func) in LOADS:
            return True
        if isinstance(inner, ast.Name) and inner.id in loaded:
            return True
    return False


def _zero(call: ast.Call, *names: str) -> bool:
    """Every one of ``names`` is passed as the constant 0 (all present)."""
    given = {k.arg: k.value for k in call.keywords}
    return all(isinstance(given.get(n), ast.Constant) and given[n].value == 0 for n in names)


def _bit_exact(call: ast.Call) -> bool:
    name = _name(call.func)
    if name in EQUAL:
        return True
    return name in CLOSE and (_zero(call, "rtol", "atol") or _zero(call, "rel", "abs"))


def _marked(decorators: list[ast.expr]) -> bool:
    return any(
        "stored_values" in {_name(n) for n in ast.walk(d) if isinstance(n, ast.Attribute)}
        for d in decorators
    )


def findings(source: str, where: str) -> list[str]:
    """What in one test module breaks the rule, a line each."""
    tree = ast.parse(source)
    module_marked = any(
        isinstance(node, ast.Assign)
        and any(_name(t) == "pytestmark" for t in node.targets)
        and _marked([node.value])
        for node in tree.body
    )
    loaded = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign) and _reads_a_file(node.value, set())
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = []
    for test in ast.walk(tree):
        if not isinstance(test, ast.FunctionDef) or not test.name.startswith("test_"):
            continue
        marked = module_marked or _marked(test.decorator_list)
        for call in ast.walk(test):
            if not isinstance(call, ast.Call) or _name(call.func) not in CLOSE | EQUAL:
                continue
            if not _reads_a_file(call, loaded):
                continue  # two values of this process: bit for bit is theirs to ask
            line = f"{where}:{call.lineno} {test.name}: compares with a value read from a file"
            if _bit_exact(call):
                found.append(f"{line} bit for bit (give it a tolerance, and say why)")
            if not marked:
                found.append(f"{line} and is not marked stored_values")
    return found


def test_every_comparison_with_a_stored_value_is_marked_and_has_a_tolerance():
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        found += findings(path.read_text(), str(path.relative_to(ROOT)))
    assert found == [], "\n".join(found)


def test_the_rule_finds_an_unmarked_comparison_and_a_zero_tolerance():
    """Issue 57's test as it was (bit for bit against a file, unmarked), and marked."""
    unmarked = """
def test_logits():
    torch.testing.assert_close(model(x), torch.load("logits.pt"), rtol=0, atol=0)
"""
    marked = "@pytest.mark.stored_values\n" + unmarked.lstrip()
    constant = """
EXPORTS = torch.load("exports.pt")

def test_logits():
    assert torch.equal(model(x), EXPORTS["logits"])
"""
    assert "not marked stored_values" in " ".join(findings(unmarked, "a.py"))
    assert "bit for bit" in " ".join(findings(unmarked, "a.py"))
    assert "bit for bit" in " ".join(findings(marked, "a.py"))
    assert "not marked" not in " ".join(findings(marked, "a.py"))
    assert "not marked stored_values" in " ".join(findings(constant, "a.py"))
    tolerant = marked.replace("rtol=0, atol=0", "rtol=1e-5, atol=1e-5")
    assert findings(tolerant, "a.py") == []
    same_process = "def test_same():\n    assert torch.equal(model(x), model(x))\n"
    assert findings(same_process, "a.py") == []
    assert findings("@pytest.mark.stored_values\n" + same_process, "a.py") == []

"""jsonargparse's failure reports condensed to one line (lit_sparse/parsing/parse_errors.py):
the key and the reason, a nested class's own reason under its class_path, a rejected link's
reason, and where a moved fibonacci option went. The reports are in jsonargparse's form (those
of ``--attention`` and ``--arch`` as it raised them)."""

from __future__ import annotations

from lit_sparse.parsing.parse_errors import condense_parse_error

UNION = (
    "  Does not validate against any of the Union subtypes\n"
    "  Subtypes: [<class 'lit_sparse.attention.base.AttentionPlugin'>, <class 'NoneType'>]\n"
    "  Errors:\n"
    "    - Problem with given class_path 'lit_sparse.FibonacciAttention':\n"
)


def not_accepted(option: str) -> str:
    """The report for ``--attention lit_sparse.FibonacciAttention --attention.<option> 3``."""
    return (
        f'Parser key "attention":\n{UNION}'
        f"        Option '{option}' is not accepted\n"
        "    - Expected a <class 'NoneType'>\n"
        "  Given value type: <class 'jsonargparse._util.NestedArg'>\n"
        f"  Given value: NestedArg(key='{option}', val='3')"
    )


def test_a_plain_report_is_its_key_and_reason():
    report = "Parser key \"arch.n_layers\":\n  Expected a <class 'int'>. Got value: x"
    assert condense_parse_error(report) == "arch.n_layers: Expected a <class 'int'>. Got value: x"


def test_an_option_a_class_does_not_accept_names_the_class():
    assert condense_parse_error(not_accepted("n_random")) == (
        "attention: lit_sparse.FibonacciAttention: Option 'n_random' is not accepted"
    )


def test_a_moved_fibonacci_option_says_where_it_went():
    assert condense_parse_error(not_accepted("alpha_min")) == (
        "attention: lit_sparse.FibonacciAttention: Option 'alpha_min' is not accepted "
        "(alpha_min is an option of the schedule now: --model.attention.schedule "
        "Linear|Coprime|Custom|Learned --model.attention.schedule.<option> VALUE)"
    )


def test_a_nested_key_is_the_outer_and_the_inner_key_with_the_inner_reason():
    report = (
        f'Parser key "attention":\n{UNION}'
        '        Parser key "window":\n'
        "          Expected a <class 'int'>. Got value: x\n"
        "    - Expected a <class 'NoneType'>\n"
        "  Given value type: <class 'jsonargparse._util.NestedArg'>\n"
        "  Given value: NestedArg(key='window', val='x')"
    )
    assert (
        condense_parse_error(report) == "attention...window: Expected a <class 'int'>. Got value: x"
    )


def test_reasons_are_listed_once_without_the_none_alternative():
    report = (
        'Parser key "data.seq_len":\n'
        "  Does not validate against any of the Union subtypes\n"
        "  Errors:\n"
        "    - Expected a <class 'int'>. Got value: x\n"
        "    - Expected a <class 'int'>. Got value: x\n"
        "    - Expected a <class 'float'>. Got value: x\n"
        "    - Expected a <class 'NoneType'>"
    )
    assert condense_parse_error(report) == (
        "data.seq_len: Expected a <class 'int'>. Got value: x; Expected a <class 'float'>. "
        "Got value: x"
    )


def test_a_rejected_link_is_its_reason_on_one_line():
    report = (
        "Call to compute_fn of link 'data.seq_len --> model.arch.context_length' failed: "
        "seq_len=64 is longer\n  than context_length=32"
    )
    assert condense_parse_error(report) == "seq_len=64 is longer than context_length=32"


def test_any_other_message_is_joined_onto_one_line():
    assert condense_parse_error("Unrecognized arguments:\n   --oops 1") == (
        "Unrecognized arguments: --oops 1"
    )

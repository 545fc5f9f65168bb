"""Plugin configurations every attention test runs over: each registered plugin's
``conformance_cases`` hook (lit_sparse.attention.base.AttentionPlugin)."""

from lit_sparse.testing import plugin_cases

__all__ = ["plugin_cases"]

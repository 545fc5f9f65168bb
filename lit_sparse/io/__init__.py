"""How every layer writes and reads files: the one atomic writer, YAML loader and Markdown
table printer, and a result computed in a fork.

Public names (imported on first use): ``write_bytes``, ``write_text`` and ``write_json`` (a file
replaced in one step, never seen half written), ``load_yaml`` (a YAML mapping, errors naming the
file), ``markdown_table``, ``call_in_fork`` (a function's result computed in a forked child) and
``import_class`` (a class from its dotted path)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

if TYPE_CHECKING:
    from lit_sparse.io.atomic import write_bytes as write_bytes
    from lit_sparse.io.atomic import write_json as write_json
    from lit_sparse.io.atomic import write_text as write_text
    from lit_sparse.io.class_paths import import_class as import_class
    from lit_sparse.io.forks import call_in_fork as call_in_fork
    from lit_sparse.io.tables import markdown_table as markdown_table
    from lit_sparse.io.yaml_files import load_yaml as load_yaml

__getattr__, __dir__, __all__ = lazy_names(__name__)

"""Text sources of the mixture: their configuration and how their documents are read.

Hub and local sources stream through ``datasets``: nothing beyond the budget is downloaded."""

from __future__ import annotations

import glob
import math
import os
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from lit_sparse.data import embedded
from lit_sparse.data.hub import OFFLINE_HINT, DataSourceUnavailable, is_network_error, require_hub
from lit_sparse.errors import ConfigError

LOCAL_BUILDERS = ("text", "json", "parquet", "csv", "arrow")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_EMBEDDED_PREFIX = "embedded:"
_NOT_EMBEDDED = (  # options of hub and file sources
    "config_name",
    "data_files",
    "val_split",
    "val_data_files",
    "revision",
    "text_template",
    "load_kwargs",
)


def _check_files(field: str, value: Any) -> None:
    if value is None:
        return
    items = [value] if isinstance(value, str) else value
    strings = isinstance(items, list | tuple) and all(
        isinstance(v, str) and v.strip() for v in items
    )
    if not (strings and items):
        raise ConfigError(f"{field}={value!r}: expected a non-empty path/glob or list of them")


def _files_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _is_remote(pattern: str) -> bool:
    return "://" in pattern


@dataclass
class SourceConfig:
    """One text source of the data mixture."""

    name: str
    """Short identifier (letters, digits, ``_ - .``); names the held-out set unless ``val_name``."""

    path: str
    """``embedded:shakespeare`` or ``embedded:math`` (offline), a ``datasets`` builder with
    ``data_files`` (text, json, parquet, csv, arrow), a local dataset folder or a hub dataset id."""

    weight: float = 1.0
    """Share of training tokens, relative to the other sources' weights; ``0``: held-out only."""

    config_name: str | None = None
    """Dataset configuration (``name=`` of ``datasets.load_dataset``), e.g. ``sample-10BT``."""

    data_files: str | list[str] | None = None
    """Training files (paths or globs, local or ``hf://``); required for the local builders."""

    split: str = "train"
    """Split read for training text."""

    text_field: str = "text"
    """Column holding a document's text (ignored when ``text_template`` is set)."""

    text_template: str | None = None
    """``str.format`` template of a row's columns, e.g. ``"{problem}\\n{solution}"``; None: the
    ``text_field``."""

    max_tokens: int | None = None
    """Token budget of the training part (reading stops there); None: the data module's
    ``token_budget`` share, or all of it."""

    val_tokens: int | None = None
    """Size of the held-out set in tokens (``0``: none). With ``val_split``/``val_data_files``
    or an embedded source, None takes all of it and a number caps it; otherwise a number holds
    out the training stream's first documents and None means no held-out set."""

    val_split: str | None = None
    """Split read for the held-out set (e.g. ``validation``); disjoint from ``split``."""

    val_data_files: str | list[str] | None = None
    """Files read for the held-out set (e.g. a shard the training files do not include)."""

    val_name: str | None = None
    """Name of the held-out set when it differs from ``name`` (e.g. ``math``)."""

    revision: str | None = None
    """Hub dataset revision (branch, tag or commit) to pin; None = the default branch."""

    load_kwargs: dict[str, Any] | None = None
    """Extra keyword arguments of ``datasets.load_dataset``, e.g. ``{"sample_by": "document"}``."""

    def __post_init__(self) -> None:
        """Check every field (in this order, so the first problem is the one reported)."""
        self._check_name_and_path()
        self._check_numbers()
        self._check_strings()
        self._check_files_and_splits()
        self._check_template()
        self._check_held_out()

    def _refuse(self, field: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(f"{field}={value!r} (source {self.name!r}): {expected}")

    def _check_name_and_path(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ConfigError(
                f"name={self.name!r}: expected letters, digits, '_', '-', '.' "
                "(starting with a letter or digit)"
            )
        if not isinstance(self.path, str) or not self.path.strip():
            raise self._refuse(
                "path",
                self.path,
                "expected 'embedded:<name>', a datasets builder "
                f"({', '.join(LOCAL_BUILDERS)}), a local folder or a hub dataset id",
            )
        if self.path.startswith(_EMBEDDED_PREFIX):
            self._check_embedded()

    def _check_embedded(self) -> None:
        """An embedded corpus exists and takes none of the hub and file options."""
        corpus = self.path[len(_EMBEDDED_PREFIX) :]
        if corpus not in embedded.EMBEDDED_SOURCES:
            allowed = ", ".join(_EMBEDDED_PREFIX + n for n in embedded.EMBEDDED_SOURCES)
            raise self._refuse("path", self.path, f"unknown embedded corpus; allowed: {allowed}")
        for field in _NOT_EMBEDDED:
            if (value := getattr(self, field)) is not None:
                raise self._refuse(
                    field, value, f"not applicable to the embedded corpus {self.path!r}"
                )

    def _check_numbers(self) -> None:
        weight = self.weight
        number = isinstance(weight, int | float) and not isinstance(weight, bool)
        if not (number and math.isfinite(weight) and weight >= 0):
            raise self._refuse(
                "weight", weight, "expected a finite number >= 0 (a token share; 0 = held-out only)"
            )
        self.weight = float(weight)
        for field, low in (("max_tokens", 1), ("val_tokens", 0)):
            value = getattr(self, field)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < low
            ):
                raise self._refuse(field, value, f"expected None or an integer >= {low}")

    def _check_strings(self) -> None:
        for field in ("split", "text_field"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise self._refuse(field, value, "expected a non-empty string")
        for field in ("config_name", "val_split", "revision"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise self._refuse(field, value, "expected None or a non-empty string")

    def _check_files_and_splits(self) -> None:
        """Files given where needed, and held-out text disjoint from the training text."""
        _check_files("data_files", self.data_files)
        _check_files("val_data_files", self.val_data_files)
        if self.path in LOCAL_BUILDERS and self.data_files is None:
            raise self._refuse(
                "data_files", None, f"the {self.path!r} builder needs data_files (paths or globs)"
            )
        if self.val_split is not None and self.val_data_files is None:
            if self.val_split == self.split:
                raise self._refuse(
                    "val_split",
                    self.val_split,
                    f"must differ from split={self.split!r} (held-out text must not overlap "
                    "training text); or give val_data_files",
                )
            if self.data_files is not None:
                raise self._refuse(
                    "val_split",
                    self.val_split,
                    "with data_files set, also give val_data_files for the held-out split",
                )
        if self.val_data_files is not None and (self.val_split or self.split) == self.split:
            if self.data_files is None:
                raise self._refuse(
                    "val_data_files",
                    self.val_data_files,
                    f"training reads all of split {self.split!r}, which may contain these "
                    "files; set data_files to the training files (disjoint from val_data_files)",
                )
            shared = set(_files_list(self.data_files)) & set(_files_list(self.val_data_files))
            if shared:
                raise self._refuse(
                    "val_data_files", self.val_data_files, f"also in data_files: {sorted(shared)}"
                )

    def _check_template(self) -> None:
        if self.text_template is None:
            return
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(self.text_template) if f]
        except ValueError as err:
            raise self._refuse(
                "text_template", self.text_template, f"not a str.format template ({err})"
            ) from None
        if not fields:
            raise self._refuse(
                "text_template",
                self.text_template,
                "names no column, e.g. '{problem}\\n{solution}'",
            )

    def _check_held_out(self) -> None:
        if self.val_name is not None and not (
            isinstance(self.val_name, str) and _NAME.match(self.val_name)
        ):
            raise self._refuse("val_name", self.val_name, "expected letters, digits, '_', '-', '.'")
        if self.load_kwargs is not None and not isinstance(self.load_kwargs, dict):
            raise self._refuse("load_kwargs", self.load_kwargs, "expected a mapping or None")
        if self.weight == 0 and not self.has_val:
            raise self._refuse(
                "weight",
                0,
                "a source with weight 0 must have a held-out set (val_tokens, val_split or "
                "val_data_files), otherwise it contributes nothing",
            )

    @property
    def kind(self) -> str:
        """``embedded``, ``local`` (builder or local folder, no network) or ``hub``."""
        if self.path.startswith(_EMBEDDED_PREFIX):
            return "embedded"
        files = _files_list(self.data_files) + _files_list(self.val_data_files)
        if any(_is_remote(f) for f in files):
            return "hub"
        if self.path in LOCAL_BUILDERS or os.path.exists(os.path.expanduser(self.path)):
            return "local"
        return "hub"

    @property
    def embedded_name(self) -> str | None:
        return self.path[len(_EMBEDDED_PREFIX) :] if self.kind == "embedded" else None

    @property
    def val_mode(self) -> str | None:
        """How the held-out set is made: ``embedded`` (the corpus's own), ``split`` (another split
        or files), ``head`` (the training stream's first documents) or None (none)."""
        if self.val_tokens == 0:
            return None
        if self.kind == "embedded":
            return "embedded"
        if self.val_split is not None or self.val_data_files is not None:
            return "split"
        return "head" if self.val_tokens is not None else None

    @property
    def has_val(self) -> bool:
        return self.val_mode is not None

    @property
    def has_train(self) -> bool:
        return self.weight > 0

    @property
    def held_out_name(self) -> str:
        return self.val_name or self.name

    def describe(self) -> str:
        """Human-readable origin, for messages."""
        if self.kind == "embedded":
            return f"embedded corpus {self.embedded_name!r}"
        what = "hub dataset" if self.kind == "hub" else "local data"
        cfg = f", config {self.config_name!r}" if self.config_name else ""
        return f"{what} {self.path}{cfg}"

    def content_spec(self, max_tokens: int | None) -> dict[str, Any]:
        """Everything that decides this source's tokens (local files' size and mtime included), the
        token-cache key's input; ``max_tokens``: the training budget."""
        skip = ("name", "weight", "val_name")  # they do not change the tokens
        spec = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        spec.update(
            text_field=self.text_field if self.text_template is None else None,
            max_tokens=max_tokens if self.has_train else 0,
            val_mode=self.val_mode,
        )
        if self.kind == "embedded":
            spec["embedded_sha256"] = embedded.corpus_sha256(self.embedded_name)
        elif self.kind == "local":
            train = _local_file_stats(_files_list(self.data_files) or [self.path], self.name)
            val = _local_file_stats(_files_list(self.val_data_files), self.name)
            shared = {f[0] for f in train} & {f[0] for f in val}
            if shared:
                raise ConfigError(
                    f"val_data_files={self.val_data_files!r} (source "
                    f"{self.name!r}): the training files include {sorted(shared)}"
                )
            spec["local_files"] = {"train": train, "val": val}
        return spec


def _local_file_stats(patterns: list[str], name: str) -> list[list]:
    """``[path, size, mtime_ns]`` of every local file the patterns match (folders walked)."""
    out = []
    for pattern in patterns:
        if _is_remote(pattern):
            continue
        matches = sorted(glob.glob(os.path.expanduser(pattern), recursive=True))
        if not matches:
            raise ConfigError(f"data_files={pattern!r} (source {name!r}): no file matches")
        for m in matches:
            paths = [Path(m)]
            if os.path.isdir(m):
                paths = sorted(p for p in Path(m).rglob("*") if p.is_file())
            for p in paths:
                st = p.stat()
                out.append([str(p.resolve()), st.st_size, st.st_mtime_ns])
    return out


def _unavailable(src: SourceConfig, err: BaseException) -> DataSourceUnavailable:
    first = str(err).splitlines()[0] if str(err) else ""
    return DataSourceUnavailable(
        f"data source {src.name!r} ({src.describe()}) could not be read "
        f"({type(err).__name__}: {first}); {OFFLINE_HINT}"
    )


def _datasets_batches(
    src: SourceConfig, split: str, files: str | list[str] | None, batch_docs: int
) -> Iterator[list[str]]:
    import datasets

    if src.kind == "hub":
        require_hub(f"data source {src.name!r} ({src.describe()})")
    kwargs = dict(src.load_kwargs or {})
    if files is not None:
        kwargs["data_files"] = {split: files}
    try:
        ds = datasets.load_dataset(
            src.path,
            name=src.config_name,
            split=split,
            streaming=True,
            revision=src.revision,
            **kwargs,
        )
        for batch in ds.iter(batch_size=batch_docs):
            yield _batch_texts(src, batch)
    except Exception as err:
        if is_network_error(err):
            raise _unavailable(src, err) from None
        raise


def _batch_texts(src: SourceConfig, batch: dict[str, list]) -> list[str]:
    if src.text_template is None:
        if src.text_field not in batch:
            raise ConfigError(
                f"text_field={src.text_field!r} (source {src.name!r}): no such "
                f"column; columns are {sorted(batch)}"
            )
        return [t if isinstance(t, str) else "" for t in batch[src.text_field]]
    n = len(next(iter(batch.values()), []))
    rows = [{k: v[i] for k, v in batch.items()} for i in range(n)]
    try:
        return [src.text_template.format(**row) for row in rows]
    except KeyError as err:
        raise ConfigError(
            f"text_template={src.text_template!r} (source {src.name!r}): column "
            f"{err} missing; columns are {sorted(batch)}"
        ) from None


def iter_text_batches(src: SourceConfig, part: str, batch_docs: int = 256) -> Iterator[list[str]]:
    """Batches of ``batch_docs`` document texts of ``src``'s ``part``: ``"train"`` (for a ``head``
    held-out set, the held-out documents come first) or ``"val"`` (not for ``head``)."""
    if part not in ("train", "val"):
        raise ConfigError(f"part={part!r}: expected 'train' or 'val'")
    if src.kind == "embedded":
        texts = [r["text"] for r in embedded.read_records(src.embedded_name, part)]
        yield from (texts[i : i + batch_docs] for i in range(0, len(texts), batch_docs))
        return
    if part == "train":
        yield from _datasets_batches(src, src.split, src.data_files, batch_docs)
        return
    if src.val_mode != "split":
        raise ConfigError(
            f"source {src.name!r} has no separate held-out split (val_mode={src.val_mode!r})"
        )
    split = src.val_split or src.split
    yield from _datasets_batches(src, split, src.val_data_files, batch_docs)

"""``python -m lit_sparse export``: a run's model as a folder lit_sparse and transformers load
(weights, config.json, tokenizer, model card) or one GGUF file (:func:`export_gguf`), atomically."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from lit_sparse.errors import ConfigError, DamagedFileError
from lit_sparse.formats import gguf, pretrained
from lit_sparse.formats.remote import REMOTE_CODE
from lit_sparse.formats.stock import stock_layout_of
from lit_sparse.formats.transformers_files import transformers_files
from lit_sparse.interop.extras import require_gguf
from lit_sparse.interop.loading import (
    is_exported,
    load_source,
    run_tokenizer_checked,
    synthetic_task,
)
from lit_sparse.io.atomic import AtomicFolder, write_text
from lit_sparse.io.tables import markdown_table
from lit_sparse.runs.checkpoint_folders import checkpoint_bytes
from lit_sparse.runs.locks import lock_holder

GGUF = "gguf"
FORMATS = (*pretrained.LAYOUTS, GGUF)
"""``lit_sparse`` (any plugin; remote code for transformers), ``llama`` (dense), ``mistral``
(sliding window): folders; ``gguf`` (dense): one file for llama.cpp."""
GGUF_MAGIC = b"GGUF"

CARD_FILE = "README.md"


@dataclass
class ExportResult:
    """The exported folder, its files and the checkpoint it came from."""

    folder: Path
    checkpoint: Path
    step: int | None
    files: dict[str, int]
    """file name -> bytes."""
    checkpoint_bytes: int
    format: str = "lit_sparse"
    training_by: str | None = None
    """The process training the run when it was exported (None: none)."""

    @property
    def note(self) -> str | None:
        """What a user should know about the export (None: nothing)."""
        if self.training_by is None:
            return None
        return (
            f"the run is training ({self.training_by}): exported its newest whole checkpoint, "
            f"step {self.step}; export again when it ends for the final weights"
        )

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())

    def to_text(self) -> str:
        step = "" if self.step is None else f" (step {self.step})"
        lines = [f"exported {self.checkpoint}{step} to {self.folder} ({self.format} format):"]
        lines += [f"  {name:<28}{file_size(size):>12}" for name, size in self.files.items()]
        share = self.total_bytes / self.checkpoint_bytes if self.checkpoint_bytes else math.nan
        lines.append(
            f"  {'total':<28}{file_size(self.total_bytes):>12} ({share:.0%} of the checkpoint's "
            f"{file_size(self.checkpoint_bytes)})"
        )
        return "\n".join(lines)


def file_size(size: int) -> str:
    """A file's size for the listing: MB from 1 MB, KB from 1 KB, else bytes."""
    if size >= 2**20:
        return f"{size / 2**20:.2f} MB"
    if size >= 2**10:
        return f"{size / 2**10:.1f} KB"
    return f"{size} B"


def _check_out(out: Path) -> None:
    """Refuse any ``out`` but a new or empty folder or an earlier export (not another model's)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out={str(out)!r}: exists and is not a folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    try:
        config = pretrained.read_config(out)
    except DamagedFileError:  # not JSON: not an export's either
        config = {}
    if config is None or pretrained.lit_sparse_keys(config) is None:
        found = "no config.json" if config is None else "its config.json is not lit_sparse's"
        raise ConfigError(
            f"out={str(out)!r}: a folder with other files in it, not an earlier export "
            f"({found}); choose a new or empty folder"
        )


def choose_format(attention, requested: str | None, has_mlp: bool = True) -> str:
    """The export format for plugin ``attention``: ``requested`` (checked), else the stock one
    (dense: llama, sliding window: mistral) when the blocks have an MLP, else lit_sparse's."""
    if requested is not None and requested not in FORMATS:
        raise ConfigError(f"format={requested!r}: must be one of {', '.join(FORMATS)}")
    if requested == GGUF:
        gguf.check_gguf_model(attention, has_mlp)
        return GGUF
    stock = stock_layout_of(attention.to_config()) if has_mlp else None
    chosen = requested or stock or "lit_sparse"
    if chosen != "lit_sparse" and chosen != stock:
        name = type(attention).name or type(attention).__name__
        raise ConfigError(
            f"format={chosen!r}: a {name} model has no {chosen} form (only dense exports as "
            "llama and sliding_window as mistral); use --format lit_sparse"
        )
    return chosen


def run_card(run, model, format: str = "lit_sparse") -> str:
    """A run's model card: the model, the run, its held-out perplexities and extrapolation
    table, and a recall task's accuracy table."""
    lines = [
        "## Training",
        "",
        f"- run: `{run.name}`, checkpoint at optimizer step {run.step}",
        f"- trained at {model.config.context_length} tokens per sequence",
        "",
    ]
    result = run.extrapolation
    if run.recall is not None:  # a recall task's held-out accuracy (no local paths in a card)
        lines.append(dataclasses.replace(run.recall, checkpoint=None).to_markdown())
    elif result is None:
        lines.append(
            "The run folder has no extrapolation.json or recall.json (neither the "
            "LengthExtrapolation nor the RecallEvaluation callback ran): no held-out scores "
            "were recorded for these weights."
        )
    if result is not None:
        result = dataclasses.replace(result, checkpoint=None)  # no local paths in a card
        length = result.reference_length
        rows = [[name, f"{result.ppl(name, length):.2f}"] for name in result.sets]
        lines += [
            "## Held-out perplexity",
            "",
            f"The final weights on each held-out set at {length} tokens (step {result.step}):",
            "",
            markdown_table(["set", "perplexity"], rows),
            "",
            result.to_markdown(),
        ]
    title = "lit_sparse " + run.name.rsplit("/version_", 1)[0]  # e.g. recall/mqar64/dense/seed0
    use = task_use(run.config.get("data"), model.config.context_length)
    return pretrained.model_card(model, title, "\n".join(lines), layout=format, use=use)


def task_use(data, length: int) -> str | None:
    """The Use section of a model trained on a synthetic task (its data config ``data``): a
    text prompt means little to it, so the card rebuilds the run's held-out examples and scores
    the weights on them. None for any other data."""
    if synthetic_task({"data": data}) is None:  # text data: no task module imported
        return None
    from lit_sparse import tasks

    try:
        module = tasks.recall_data_from_config(data)
    except (ConfigError, ImportError, TypeError):  # other data, or options it no longer takes
        return None
    cls = type(module)
    where = "lit_sparse.tasks" if getattr(tasks, cls.__name__, None) is cls else cls.__module__
    # every option the run set, defaults included: a later default must not change the examples
    given = {k: v for k, v in (data.get("init_args") or {}).items() if v is not None}
    options = "".join(f"    {k}={v!r},\n" for k, v in given.items())
    return (
        f"The model was trained on a synthetic task (`{cls.__name__}`). To score it on the "
        "run's held-out examples, regenerated from their seed:\n\n"
        "```python\n"
        "from lit_sparse import LanguageModel\n"
        "from lit_sparse.evaluation.recall import evaluate_recall\n"
        f"from {where} import {cls.__name__}\n\n"
        'model = LanguageModel.from_pretrained("THIS_FOLDER_OR_REPO").eval()\n'
        f"data = {cls.__name__}(  # the run's task\n{options})\n"
        f'print(evaluate_recall(model, data, [{length}], ["use"]).to_markdown())\n'
        "```\n"
    )


def _files_in_order(folder: Path) -> dict[str, int]:
    """name -> bytes of every file in ``folder``: weights, config, tokenizer and card first."""
    first = [pretrained.WEIGHTS_FILE, pretrained.CONFIG_FILE, pretrained.TOKENIZER_FILE, CARD_FILE]
    names = sorted(p.name for p in folder.iterdir())
    ordered = [n for n in first if n in names] + [n for n in names if n not in first]
    return {name: (folder / name).stat().st_size for name in ordered}


def _check_replaced(out: Path, build: Path) -> None:
    """Refuse to replace an earlier export holding files no export writes (notes, a ``.git``)."""
    if not out.is_dir():
        return
    written = {p.name for p in build.iterdir()} | set(REMOTE_CODE)
    others = sorted(p.name for p in out.iterdir() if p.name not in written)
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ConfigError(
            f"out={str(out)!r}: an earlier export that also holds {shown}, which this export "
            "does not write; the folder is replaced as a whole, so move them out or choose "
            "another folder"
        )


def export_run(
    path: str | Path,
    out: str | Path,
    tokenizer: str | None = None,
    format: str | None = None,
    option: str = "tokenizer=...",
) -> ExportResult:
    """Export a run's newest checkpoint to ``out``, all or nothing: weights, config.json, the
    tokenizer and transformers' files, README.md and (lit_sparse's format) the remote code.

    Args:
        path: a run folder, an experiment folder (its newest run) or a checkpoint file.
        out: a new or empty folder, or an earlier export (replaced as a whole).
        tokenizer: the tokenizer to ship (default: the run's, checked against the checkpoint).
        format: ``lit_sparse``, ``llama`` (dense), ``mistral`` (sliding window) or ``gguf``
            (:func:`export_gguf`); default: the stock format where one fits, else lit_sparse.
        option: how the caller names another tokenizer, for the messages.
    """
    source, out = Path(path).expanduser(), Path(out).expanduser()
    if format is not None and format not in FORMATS:
        raise ConfigError(f"format={format!r}: must be one of {', '.join(FORMATS)}")
    if format == GGUF:
        return export_gguf(path, out, tokenizer, option=option)
    if not source.exists():
        raise ConfigError(f"path={str(path)!r}: no such run folder or checkpoint")
    if out.is_symlink():  # replace the folder it points at, not the link
        out = out.resolve()
    _check_out(out)
    run, model, chosen, loaded = _run_model(source, path, format, tokenizer, option)
    training_by = lock_holder(run.path)
    ids = {"eos_token_id": loaded.eos_id, "bos_token_id": loaded.eos_id}
    with AtomicFolder(out) as folder:
        build = folder.temporary
        write_text(build / pretrained.TOKENIZER_FILE, loaded.tokenizer.to_str(pretty=True))
        for name, text in transformers_files(loaded.eos_token, loaded.eos_id).items():
            write_text(build / name, text)
        write_text(build / CARD_FILE, run_card(run, model, chosen))
        pretrained.save(model, build, layout=chosen, extra=ids, tokenizer_sha256=loaded.sha256)
        _check_replaced(out, build)
        files = _files_in_order(build)
    checkpoint = Path(run.checkpoint)
    return ExportResult(
        out, checkpoint, run.step, files, checkpoint_bytes(checkpoint), chosen, training_by
    )


def _run_model(source: Path, path, format: str | None, tokenizer: str | None, option: str):
    """The run at ``source``, its model, export format and tokenizer (checked)."""
    from lit_sparse.runs.analysis import load_run

    run = load_run(source, load_model="network")  # the network alone: no Lightning
    if run.model is None:
        raise ConfigError(f"path={str(path)!r}: no checkpoint found ({run.path}/checkpoints)")
    model = run.model
    chosen = choose_format(model.attention, format, has_mlp=bool(model.config.ffn_width))
    return run, model, chosen, run_tokenizer_checked(run, tokenizer, option)


def _check_gguf_out(out: Path) -> None:
    """Refuse to write a GGUF file over a folder or over a file that is not a GGUF file."""
    if out.is_dir():
        raise ConfigError(
            f"out={str(out)!r}: a folder; --format gguf writes one file (e.g. model.gguf)"
        )
    if out.exists():
        with open(out, "rb") as file:
            if file.read(len(GGUF_MAGIC)) != GGUF_MAGIC:
                raise ConfigError(
                    f"out={str(out)!r}: an existing file that is not a GGUF file; choose a new "
                    "path (an earlier GGUF export is replaced)"
                )


def export_gguf(
    path: str | Path,
    out: str | Path,
    tokenizer: str | None = None,
    gguf_type: str = gguf.DEFAULT_GGUF_TYPE,
    option: str = "tokenizer=...",
) -> ExportResult:
    """Write a dense model as one GGUF file (``llama`` architecture) for llama.cpp, atomically.

    Args:
        path: a run folder, an experiment folder, a checkpoint file or an exported folder.
        out: the file to write (new, or an earlier GGUF export, replaced).
        tokenizer: a byte-level BPE to write (default: the run's or folder's own, checked).
        gguf_type: the matrices' type, ``f32``, ``f16`` or ``q8_0`` (norms stay f32).
        option: how the caller names another tokenizer, for the messages.
    """
    require_gguf()
    gguf.check_gguf_type(gguf_type)
    source, out = Path(path).expanduser(), Path(out).expanduser()
    if not source.exists():
        raise ConfigError(f"path={str(path)!r}: no such run folder, checkpoint or exported folder")
    _check_gguf_out(out)
    step = training_by = None
    if is_exported(source):
        found = load_source(source, tokenizer, option=option)
        model, loaded, checkpoint = found.model, found.tokenizer, source / pretrained.WEIGHTS_FILE
        choose_format(model.attention, GGUF, has_mlp=bool(model.config.ffn_width))
    else:
        run, model, _, loaded = _run_model(source, path, GGUF, tokenizer, option)
        training_by, step, checkpoint = lock_holder(run.path), run.step, Path(run.checkpoint)
    vocab = gguf.tokenizer_vocab(loaded.tokenizer.to_str(), loaded.eos_id)
    gguf.write_gguf(model.eval(), out, vocab, gguf_type, name=f"lit_sparse {source.resolve().name}")
    files, size = {out.name: out.stat().st_size}, checkpoint_bytes(checkpoint)
    return ExportResult(out, checkpoint, step, files, size, f"gguf {gguf_type}", training_by)

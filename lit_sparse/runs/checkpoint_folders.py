"""Sharded checkpoints: the folder a run trained with FSDP2 saves instead of a file.

Lightning's ModelParallelStrategy writes ``last.ckpt`` as a folder: each process's shard of the
weights and optimizer states (``__<rank>_0.distcp``), the shards' index (``.metadata``) and the
rest of a checkpoint (``meta.pt``). lit_sparse's strategy (:mod:`lit_sparse.runs.strategy`) adds
``crc32.json``, every file's size and CRC-32, so a folder is verified as a checkpoint file is,
and writes the folder atomically. :func:`read_folder` gives what ``torch.load`` gives for a file:
the metadata and, with ``weights``, the consolidated weights as ``state_dict``, on one process.
"""

from __future__ import annotations

import io
import json
import os
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

__all__ = [
    "CHECKSUMS",
    "METADATA",
    "checkpoint_bytes",
    "file_checksums",
    "folder_problem",
    "is_checkpoint",
    "is_sharded_checkpoint",
    "read_folder",
]

METADATA = "meta.pt"
"""Lightning's file of everything but the weights and optimizer states (its
``_METADATA_FILENAME``)."""

CHECKSUMS = "crc32.json"
"""lit_sparse's record of every file's size and CRC-32."""

_CHUNK = 1 << 22


_INDEX = ".metadata"
"""torch.distributed.checkpoint's index of the shards."""


def is_sharded_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a sharded checkpoint folder: it holds ``meta.pt``, the shards'
    index, lit_sparse's record or a shard. One that lacks some of them is still a checkpoint
    (a damaged or incomplete one, refused in one line when read), never "no checkpoint"."""
    path = Path(path)
    if not path.is_dir():
        return False
    if any((path / name).is_file() for name in (METADATA, _INDEX, CHECKSUMS)):
        return True
    return any(path.glob("*.distcp"))


def is_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a checkpoint: a file, or the folder of a sharded one."""
    return Path(path).is_file() or is_sharded_checkpoint(path)


def checkpoint_bytes(path: str | os.PathLike) -> int:
    """A checkpoint's size on disk: the file's, or the sum of a sharded folder's files."""
    path = Path(path)
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def file_checksums(folder: Path, names: list[str]) -> dict[str, list[int]]:
    """name -> [size, CRC-32] of ``names`` in ``folder``."""
    return {name: [(folder / name).stat().st_size, _crc32(folder / name)] for name in names}


def folder_problem(path: Path, read_files: bool = True) -> str | None:
    """Why the folder ``path`` is not a whole sharded checkpoint (None: it is). With
    ``crc32.json``, every file it lists must have its size and CRC-32 (``read_files=False``:
    its size only, without reading it); without it (a folder Lightning's own strategy
    wrote), every shard the index names must exist and hold the bytes the index gives it,
    and (``read_files``) each tensor record of a shard must pass its own CRC-32 check."""
    if not (path / METADATA).is_file():
        return (
            f"its {METADATA} is missing (the step, hyperparameters and loop states: the shards "
            "alone can be neither resumed nor read)"
        )
    record = path / CHECKSUMS
    if record.is_file():
        try:
            files = json.loads(record.read_text())["files"]
        except (ValueError, KeyError, TypeError, OSError) as err:
            return f"{CHECKSUMS} is not readable ({err})"
        for name, (size, crc) in sorted(files.items()):
            file = path / name
            if not file.is_file():
                return f"its file {name!r} is missing"
            if file.stat().st_size != size:
                return f"its file {name!r} has {file.stat().st_size} bytes, {size} were written"
            if read_files and _crc32(file) != crc:
                return f"its file {name!r} fails its CRC-32 check (a changed bit or a partial copy)"
        return None
    try:
        index = dcp.FileSystemReader(str(path)).read_metadata()
    except Exception as err:  # a truncated or foreign .metadata
        return f"its index .metadata is not readable ({type(err).__name__}: {err})"
    for item in index.storage_data.values():
        file = path / item.relative_path
        if not file.is_file() or file.stat().st_size < item.offset + item.length:
            return f"its shard {item.relative_path!r} is missing or truncated"
    return _damaged_record(path, index) if read_files else None


def _damaged_record(path: Path, index: Any) -> str | None:
    """Why a shard of a folder without ``crc32.json`` is damaged (None: none is): each tensor
    record of a shard is a zip of its own (torch.save), whose entries' CRC-32s are checked;
    ``torch.load`` does not check them, so a changed bit would load silently."""
    by_file: dict[str, list[tuple[Any, Any]]] = {}
    for key, item in index.storage_data.items():
        by_file.setdefault(item.relative_path, []).append((item.offset, item.length, key))
    for name, items in sorted(by_file.items()):
        with open(path / name, "rb") as handle:
            for offset, length, key in sorted(items, key=lambda found: found[:2]):
                handle.seek(offset)
                record = handle.read(length)
                if record[:4] != b"PK\x03\x04":  # a record of bytes (not a tensor): no CRC
                    continue
                try:
                    with zipfile.ZipFile(io.BytesIO(record)) as archive:
                        damaged = archive.testzip()
                    why = None if damaged is None else f"its entry {damaged!r} fails its CRC-32"
                except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as err:
                    why = f"it is not readable: {err}"
                if why is not None:
                    return (
                        f"its shard {name!r} is damaged: the record of {key.fqn!r} at byte "
                        f"{offset}: {why} (a changed bit or a partial copy)"
                    )
    return None


def read_folder(path: str | os.PathLike, weights: bool = True) -> dict[str, Any]:
    """A sharded checkpoint as one dict on the CPU (the folder verified first by the
    caller): ``meta.pt``'s values and, with ``weights``, ``state_dict``: every weight whole
    (never the optimizer states), read in this process alone."""
    path = Path(path)
    checkpoint = torch.load(path / METADATA, map_location="cpu", weights_only=True)
    if weights:
        index = dcp.FileSystemReader(str(path)).read_metadata()
        prefix = "state_dict."
        state = {
            key[len(prefix) :]: torch.empty(item.size, dtype=item.properties.dtype)
            for key, item in index.state_dict_metadata.items()
            if key.startswith(prefix) and isinstance(item, TensorStorageMetadata)
        }
        loaded = {"state_dict": state}
        with warnings.catch_warnings():  # that no_dist reads in one process, as asked
            warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
            dcp.load(loaded, checkpoint_id=str(path), no_dist=True)
        checkpoint["state_dict"] = loaded["state_dict"]
    return checkpoint

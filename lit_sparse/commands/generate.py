"""``python -m lit_sparse generate``: continue a prompt with a trained model, streaming text.

Takes a run folder (its newest checkpoint), an experiment folder (its newest run), a checkpoint
file of a run or an exported folder, with the run's own tokenizer. Each new token reads only the
cached keys its attention pattern attends to; generation stops at the end-of-text token.

    python -m lit_sparse generate runs/quickstart/coprime --prompt "ROMEO:" --max_new_tokens 60
    python -m lit_sparse generate exported/ --prompt_file prompt.txt --temperature 0 --stats
    python -m lit_sparse generate exported/ --prompt "ROMEO:" --quantize int8
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lit_sparse.commands import command_parser, reports_errors
from lit_sparse.errors import ConfigError, interrupted


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("generate", __doc__.split("\n\n")[1])
    parser.add_argument("path", help="a run folder, a .ckpt file of a run or an exported folder")
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="the text to continue (default: start a new document)")
    prompt.add_argument("--prompt_file", "--prompt-file", help="read it from a file")
    parser.add_argument(
        "--max_new_tokens", "--max-new-tokens", type=int, default=100, help="tokens to generate"
    )
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="0: greedy (deterministic); default 1"
    )
    parser.add_argument(
        "--top_k",
        "--top-k",
        type=int,
        help="sample among the k most likely tokens (default: all of them)",
    )
    parser.add_argument(
        "--top_p", "--top-p", type=float, help="nucleus sampling, in (0, 1] (default: off)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="makes sampling reproducible (default: none, a random seed: each call samples "
        "other text)",
    )
    parser.add_argument(
        "--ignore_eos",
        "--ignore-eos",
        action="store_true",
        help="keep going past the end-of-text token",
    )
    parser.add_argument("--tokenizer", help="default: the run's own")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the weights' dtype while decoding: bfloat16 halves the bytes a step reads (about "
        "half the time per token on a CPU at batch 1); activations and sums stay float32",
    )
    parser.add_argument(
        "--quantize",
        default="none",
        help="none (default) or int8: the matrices in int8 with a float32 scale per output "
        "channel, a quarter of float32's bytes per step (CPU only; not with --dtype bfloat16, "
        "which int8 replaces); norms, caches and the residual stream stay float32",
    )
    parser.add_argument(
        "--prefill_chunk",
        "--prefill-chunk",
        type=int,
        default=2048,
        help="prompt tokens per chunk of the prefill (memory is bounded by the chunk and the "
        "cache, not by the prompt; default 2048)",
    )
    parser.add_argument(
        "--stats",
        action="store_true",
        help="print tokens/s and the KV-cache size at the end (on stderr)",
    )
    return parser


def _checked_prompt(prompt: str) -> str:
    """``prompt`` if UTF-8 text, else one ConfigError line naming the first bad byte."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(prompt[err.start])
        shown = f"the byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"{chr(code)!r}"
        raise ConfigError(
            f"--prompt: {shown} at character {err.start} is not UTF-8 text; give the prompt as "
            "UTF-8 (or in a UTF-8 file with --prompt_file)"
        ) from None
    return prompt


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    from lit_sparse.generation import Generation, Sampler
    from lit_sparse.generation.quantize import check_quantize, quantize
    from lit_sparse.generation.text import TextStream
    from lit_sparse.generation.weights import weight_dtype
    from lit_sparse.interop.loading import load_source, resolve_device

    # every cheap check before the model is loaded
    if args.max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens={args.max_new_tokens}: must be >= 1")
    if args.prefill_chunk < 1:
        raise ConfigError(f"prefill_chunk={args.prefill_chunk}: must be an integer >= 1")
    sampling = {name: getattr(args, name) for name in ("temperature", "top_k", "top_p", "seed")}
    Sampler(**sampling)
    if check_quantize(args.quantize) == "int8" and args.dtype != "float32":
        raise ConfigError(
            f"quantize='int8' with dtype={args.dtype!r}: int8 replaces the matrices --dtype "
            "would narrow; use one of them"
        )
    if args.prompt_file is not None:
        prompt_path = Path(args.prompt_file)
        if not prompt_path.is_file():
            raise ConfigError(f"prompt_file={args.prompt_file!r}: no such file")
        try:
            prompt = prompt_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ConfigError(f"prompt_file={args.prompt_file!r}: not UTF-8 text ({err})") from None
    else:
        prompt = _checked_prompt(args.prompt or "")
    device = resolve_device(args.device)
    if args.quantize == "int8" and device.type != "cpu":
        raise ConfigError(
            f"quantize='int8' with device={args.device!r}: the int8 kernel runs on the CPU "
            "only (on a GPU use --dtype bfloat16)"
        )

    source = load_source(args.path, args.tokenizer, option="--tokenizer")
    if source.task is not None and args.tokenizer is None:
        raise ConfigError(
            f"path={args.path!r}: a run of the synthetic task {source.task!r}: its tokens are "
            "the task's ids, not text, so the text tokenizer would decode nonsense; name one "
            "on purpose with --tokenizer (e.g. --tokenizer embedded) to see its ids as text"
        )
    tokenizer = source.tokenizer
    ids = tokenizer.encode(prompt) if prompt else []  # as training tokenized a document
    ids = ids or [tokenizer.eos_id]  # an empty prompt starts a new document
    model = quantize(weight_dtype(source.model.to(device), args.dtype), args.quantize)
    sampling["eos_id"] = None if args.ignore_eos else tokenizer.eos_id
    chunk = args.prefill_chunk
    generation = Generation(model, [ids], args.max_new_tokens, **sampling, prefill_chunk=chunk)
    stream = TextStream(tokenizer.tokenizer, ids)  # the prompt: decoded beside its last tokens
    print(prompt, end="", flush=True)
    made = 0
    try:
        for tokens in generation:
            made += 1
            text = stream.push(int(tokens[0]))
            if text:
                print(text, end="", flush=True)
    except KeyboardInterrupt:  # keep what was streamed, end its line, say how far it got
        print(stream.flush())
        return interrupted(f"stopped after {made} new tokens; the text above is what was made")
    print(stream.flush(), flush=True)
    if args.stats:
        print(f"{source.description}: {generation.stats.to_text()}", file=sys.stderr)
    return 0

"""``python -m lit_sparse generate``: continue a prompt with a trained model, streaming text."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from lit_sparse.commands import command
from lit_sparse.errors import ConfigError, interrupted


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


@command("generate", positional=("path",))
def generate(
    path: str,
    prompt: str | None = None,
    prompt_file: str | None = None,
    max_new_tokens: int = 100,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    ignore_eos: bool = False,
    tokenizer: str | None = None,
    device: str = "cpu",
    dtype: Literal["float32", "bfloat16"] = "float32",
    quantize: str = "none",
    prefill_chunk: int = 2048,
    stats: bool = False,
) -> int:
    """Continue a prompt with a trained model (a run or an export).

    Takes a run folder (its newest checkpoint), an experiment folder (its newest run), a
    checkpoint file of a run or an exported folder, with the run's own tokenizer. Each new token
    reads only the cached keys its attention pattern attends to; generation stops at the
    end-of-text token.

        python -m lit_sparse generate runs/quickstart/coprime --prompt "ROMEO:" --max_new_tokens 60
        python -m lit_sparse generate exported/ --prompt_file prompt.txt --temperature 0 --stats
        python -m lit_sparse generate exported/ --prompt "ROMEO:" --quantize int8

    Args:
        path: a run folder, a .ckpt file of a run or an exported folder
        prompt: the text to continue (default: start a new document)
        prompt_file: read it from a file
        max_new_tokens: tokens to generate
        temperature: 0: greedy (deterministic); default 1
        top_k: sample among the k most likely tokens (default: all of them)
        top_p: nucleus sampling, in (0, 1] (default: off)
        seed: makes sampling reproducible (default: none, a random seed: each call samples
            other text)
        ignore_eos: keep going past the end-of-text token
        tokenizer: default: the run's own
        device: cpu, cuda, cuda:1, ... (default cpu)
        dtype: the weights' dtype while decoding: bfloat16 halves the bytes a step reads (about
            half the time per token on a CPU at batch 1); activations and sums stay float32
        quantize: none (default) or int8: the matrices in int8 with a float32 scale per output
            channel, a quarter of float32's bytes per step (CPU only; not with --dtype
            bfloat16, which int8 replaces); norms, caches and the residual stream stay float32
        prefill_chunk: prompt tokens per chunk of the prefill (memory is bounded by the chunk
            and the cache, not by the prompt; default 2048)
        stats: print tokens/s and the KV-cache size at the end (on stderr)
    """
    if prompt is not None and prompt_file is not None:
        raise ConfigError("--prompt and --prompt_file: give one of them")
    from lit_sparse.generation import Generation, Sampler
    from lit_sparse.generation.quantize import check_quantize
    from lit_sparse.generation.quantize import quantize as quantized
    from lit_sparse.generation.text import TextStream
    from lit_sparse.generation.weights import weight_dtype
    from lit_sparse.interop.loading import load_source, resolve_device

    # every cheap check before the model is loaded
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens={max_new_tokens}: must be >= 1")
    if prefill_chunk < 1:
        raise ConfigError(f"prefill_chunk={prefill_chunk}: must be an integer >= 1")
    sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
    Sampler(**sampling)
    if check_quantize(quantize) == "int8" and dtype != "float32":
        raise ConfigError(
            f"quantize='int8' with dtype={dtype!r}: int8 replaces the matrices --dtype "
            "would narrow; use one of them"
        )
    if prompt_file is not None:
        prompt_path = Path(prompt_file)
        if not prompt_path.is_file():
            raise ConfigError(f"prompt_file={prompt_file!r}: no such file")
        try:
            prompt = prompt_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ConfigError(f"prompt_file={prompt_file!r}: not UTF-8 text ({err})") from None
    else:
        prompt = _checked_prompt(prompt or "")
    on = resolve_device(device)
    if quantize == "int8" and on.type != "cpu":
        raise ConfigError(
            f"quantize='int8' with device={device!r}: the int8 kernel runs on the CPU "
            "only (on a GPU use --dtype bfloat16)"
        )

    source = load_source(path, tokenizer, option="--tokenizer")
    if source.task is not None and tokenizer is None:
        raise ConfigError(
            f"path={path!r}: a run of the synthetic task {source.task!r}: its tokens are "
            "the task's ids, not text, so the text tokenizer would decode nonsense; name one "
            "on purpose with --tokenizer (e.g. --tokenizer embedded) to see its ids as text"
        )
    text_tokenizer = source.tokenizer
    ids = text_tokenizer.encode(prompt) if prompt else []  # as training tokenized a document
    ids = ids or [text_tokenizer.eos_id]  # an empty prompt starts a new document
    model = quantized(weight_dtype(source.model.to(on), dtype), quantize)
    sampling["eos_id"] = None if ignore_eos else text_tokenizer.eos_id
    chunk = prefill_chunk
    generation = Generation(model, [ids], max_new_tokens, **sampling, prefill_chunk=chunk)
    stream = TextStream(text_tokenizer.tokenizer, ids)  # the prompt: decoded beside its last tokens
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
    if stats:
        print(f"{source.description}: {generation.stats.to_text()}", file=sys.stderr)
    return 0

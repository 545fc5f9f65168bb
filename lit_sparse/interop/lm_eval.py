"""The ``lit_sparse`` model of lm-evaluation-harness (the ``eval`` extra), registered on import
(``python -m lit_sparse lm-eval`` runs lm-eval's command line), built on ``load_pretrained``,
``score`` and ``generate_text``; rolling windows are lm-eval's, the first after end-of-text."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError, MissingExtraError

try:
    from lm_eval import utils as lm_eval_utils
    from lm_eval.api.model import TemplateLM
    from lm_eval.api.registry import register_model
    from lm_eval.models.utils import normalize_gen_kwargs
except ImportError as err:  # pragma: no cover - exercised in a test with lm_eval hidden
    raise MissingExtraError(
        f'lm-eval is not installed ({err}); install the eval extra: pip install -e ".[eval]" '
        "(or pip install 'lm_eval>=0.4.13')"
    ) from None

MODEL_NAME = "lit_sparse"
DEFAULT_BATCH = 16
AUTO_BATCH_TOKENS = 16384  # batch_size=auto: about this many input tokens per forward
DEFAULT_MAX_GEN_TOKS = 256
NO_CHAT_TEMPLATE = (
    "apply_chat_template: the lit_sparse model has no chat template (it is trained on plain "
    "documents, and its tokenizer defines none); leave the option out"
)
GENERATION_KEYS = {"until", "max_gen_toks", "do_sample", "temperature", "top_k", "top_p", "seed"}

log = logging.getLogger(__name__)

_LM_EVAL_DEFAULT_DEVICE = "cuda:0"  # what lm-eval's command line passes without --device
_cli_device_given = True  # False while run_cli runs a command line without --device


def _quiet_about_our_tasks(record: logging.LogRecord) -> bool:
    """Hides lm-eval's ``--metadata`` hint and ``lit_sparse`` tag clash for our shipped tasks."""
    text = record.getMessage()
    metadata_hint = "Custom kwargs can be passed to `--metadata`" in text
    clash = text.startswith(f"A local directory named '{MODEL_NAME}' exists")
    return not (metadata_hint and text.startswith("lit_sparse_")) and not clash


for _name in ("lm_eval.api.task", "lm_eval.config.evaluate_config"):
    logging.getLogger(_name).addFilter(_quiet_about_our_tasks)


def run_cli(argv: Sequence[str], prog: str = "lm-eval") -> None:
    """lm-eval's own command line on ``argv``, with the ``lit_sparse`` model registered."""
    from lm_eval.__main__ import cli_evaluate

    global _cli_device_given
    saved, saved_given = sys.argv, _cli_device_given
    sys.argv = [prog, *argv]  # lm-eval's parser reads sys.argv
    _cli_device_given = any(a == "--device" or a.startswith("--device=") for a in argv)
    try:
        cli_evaluate()
    finally:
        sys.argv, _cli_device_given = saved, saved_given


def _positive(name: str, value: Any, allow_none: bool = False) -> int | None:
    """An integer model argument >= 1 (lm-eval passes them as parsed strings or ints)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return check_int(f"model_args {name}", value, allow_none=allow_none)


@register_model(MODEL_NAME)
class LitSparseLM(TemplateLM):
    """A lit_sparse model for lm-eval: ``--model lit_sparse --model_args pretrained=PATH,...``.

    Args:
        pretrained: an exported folder, a run folder, an experiment folder or a ``.ckpt`` file.
        device: ``cpu``, ``cuda``, ``cuda:1``, ... (default: CUDA, else the CPU with a warning).
        dtype: ``float32`` (as saved), ``bfloat16`` or ``float16``.
        batch_size: pairs or prompts per forward; ``auto``: about 16k input tokens.
        max_length: tokens per input (default: the training length from config.json).
        truncation: ``error`` (default: an input above ``max_length`` is an error) or ``left``
            (its oldest tokens dropped, with a warning).
        max_gen_toks: new tokens of ``generate_until`` when a task does not say (256);
            lm-eval's ``--gen_kwargs max_gen_toks=N`` overrides a task's own.
        tokenizer: another tokenizer (with a note when the weights were trained with another).
        verify_weights: check an exported folder's weights' sha256 (``false``: changed on purpose).
        trust_remote_code: accepted for lm-eval's flag; the model runs lit_sparse's own code.
    """

    def __init__(
        self,
        pretrained: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int | str | None = None,
        max_batch_size: int | None = None,
        max_length: int | None = None,
        truncation: str = "error",
        max_gen_toks: int = DEFAULT_MAX_GEN_TOKS,
        tokenizer: str | None = None,
        verify_weights: bool = True,
        trust_remote_code: bool | None = None,
        **unknown: Any,
    ) -> None:
        super().__init__()
        import torch

        from lit_sparse.generation.scoring import TRUNCATION, length_limit
        from lit_sparse.interop.loading import load_pretrained, resolve_dtype

        if unknown:
            raise ConfigError(
                f"model_args {', '.join(sorted(unknown))}: not options of the lit_sparse model; "
                "allowed: pretrained, device, dtype, batch_size, max_length, truncation, "
                "max_gen_toks, tokenizer, verify_weights"
            )
        if not pretrained:
            raise ConfigError(
                "model_args pretrained: required (--model_args pretrained=DIR: an exported "
                "folder, a run folder or a .ckpt file)"
            )
        if not Path(str(pretrained)).expanduser().exists():
            raise ConfigError(
                f"model_args pretrained={pretrained!r}: no such exported folder, run folder or "
                "checkpoint"
            )
        if not isinstance(verify_weights, bool):
            raise ConfigError(
                f"model_args verify_weights={verify_weights!r}: expected true or false"
            )
        if truncation not in TRUNCATION:
            raise ConfigError(
                f"model_args truncation={truncation!r}: allowed: {', '.join(TRUNCATION)}"
            )
        self.truncation = truncation
        self.max_gen_toks = _positive("max_gen_toks", max_gen_toks)
        requested = _positive("max_length", max_length, allow_none=True)
        fixed_batch, batch_cap = self._batch_option(batch_size, max_batch_size)
        resolve_dtype(dtype)  # a bad dtype is one line before the model is read
        if device is None or (str(device).startswith("cuda") and not torch.cuda.is_available()):
            # lm-eval's command line passes cuda:0 when --device is not given: the CPU is
            # then the default, not a fallback worth a warning
            asked = device is not None and (
                _cli_device_given or str(device) != _LM_EVAL_DEFAULT_DEVICE
            )
            if asked:  # as lm-eval's hf model does
                log.warning("model_args device=%s: CUDA is not available, using the CPU", device)
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model, self.tokenizer = load_pretrained(
            pretrained, device, dtype, tokenizer, verify_weights, option="model_args tokenizer=..."
        )
        self._device = next(self.model.parameters()).device
        self.pretrained = str(pretrained)
        try:
            limit = length_limit(self.model, requested)
        except ConfigError as err:
            raise ConfigError(f"model_args {err}") from None
        training = self.model.config.context_length
        self._max_length = limit if requested is not None else min(training, limit or training)
        auto_batch = max(1, AUTO_BATCH_TOKENS // self._max_length)
        self.batch_size = fixed_batch or min(auto_batch, batch_cap or auto_batch)
        plugin = self.model.attention.to_config()["class_path"]
        log.info(
            "lit_sparse model %s: %s on %s, max_length %d (trained at %d), batch size %d",
            self.pretrained, plugin, self._device, self._max_length, training, self.batch_size,
        )  # fmt: skip

    @staticmethod
    def _batch_option(batch_size: Any, max_batch_size: Any) -> tuple[int | None, int | None]:
        """(the batch size, None), or for ``auto`` (None, its cap: None for none)."""
        if isinstance(batch_size, str) and batch_size.startswith("auto"):
            return None, _positive("max_batch_size", max_batch_size, allow_none=True)
        fixed = DEFAULT_BATCH if batch_size is None else _positive("batch_size", batch_size)
        return fixed, None

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_id

    @property
    def prefix_token_id(self) -> int:
        """What precedes a document: the end-of-text id (``tokenizer.document_prefix``)."""
        return self.tokenizer.document_prefix[-1]

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def device(self):
        return self._device

    @property
    def tokenizer_name(self) -> str:
        return f"lit_sparse-{self.tokenizer.sha256[:16]}"

    def tok_encode(
        self, string: str, add_special_tokens: bool | None = None, **kwargs
    ) -> list[int]:
        """As training tokenized documents: nothing added (the prefix is ``prefix_token_id``)."""
        return self.tokenizer.encode(string)

    def tok_decode(self, tokens: list[int], **kwargs) -> str:
        return self.tokenizer.decode(tokens)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs):
        """requests: ((context, continuation) or None, context ids, continuation ids)."""
        from lit_sparse.generation.scoring import score

        results = score(
            self.model,
            [(context, continuation) for _, context, continuation in requests],
            batch_size=self.batch_size,
            max_length=self._max_length,
            truncation=self.truncation,
            progress=not disable_tqdm,
        )
        for (key, _, _), result in zip(requests, results, strict=True):
            if key is not None and key[0] is not None:
                self.cache_hook.add_partial("loglikelihood", key, tuple(result))
        return [tuple(result) for result in results]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Each document's log-likelihood over rolling windows (the first after end-of-text)."""
        windows, owners = [], []
        for n, (text,) in enumerate(request.args for request in requests):
            for window in lm_eval_utils.get_rolling_token_windows(
                token_list=self.tok_encode(text),
                prefix_token=self.prefix_token_id,
                max_seq_len=self._max_length,
                context_len=1,
            ):
                windows.append((None, *lm_eval_utils.make_disjoint_window(window)))
                owners.append(n)
        totals = [0.0] * len(requests)
        scores = self._loglikelihood_tokens(windows, disable_tqdm)
        for n, (logprob, _) in zip(owners, scores, strict=True):
            totals[n] += logprob
        for request, total in zip(requests, totals, strict=True):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, total)
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Continuations up to the first ``until`` string (left out) or end-of-text."""
        from tqdm.auto import tqdm

        from lit_sparse.generation.text_generation import generate_text

        bar = tqdm(total=len(requests), desc="generate_until", disable=disable_tqdm)
        groups: dict[str, list[int]] = {}
        for n, request in enumerate(requests):
            groups.setdefault(repr(sorted(request.args[1].items())), []).append(n)
        texts: list[str] = [""] * len(requests)
        for members in groups.values():
            options = self._generation_options(requests[members[0]].args[1])
            contexts = [requests[n].args[0] for n in members]
            self._check_fits(
                [requests[n] for n in members],
                [len(ids) for ids in self.tokenizer.encode_batch(contexts)],
                options["max_new_tokens"],
            )
            # greedy tokens do not depend on the batching: a few batches per call, so the bar
            # moves; sampled ones do (and a seed starts each call), so one call
            step = len(members) if options["temperature"] > 0 else 4 * self.batch_size
            for start in range(0, len(members), step):
                chunk = members[start : start + step]
                generated = generate_text(
                    self.model, self.tokenizer, contexts[start : start + step], **options
                )
                for n, text in zip(chunk, generated, strict=True):
                    texts[n] = text
                    self.cache_hook.add_partial("generate_until", requests[n].args, text)
                bar.update(len(chunk))
        bar.close()
        return texts

    def _check_fits(self, requests, prompt_tokens: list[int], new_tokens: int) -> None:
        """One line naming the task and the fix when a prompt plus generation exceed max_length."""
        limit = self._max_length
        longer = (
            "--model_args pretrained=...,max_length=N (lit_sparse's Fibonacci and sliding-window "
            "models take any length)"
        )
        wins = "(a task's max_gen_toks wins over the model argument's)"
        if new_tokens >= limit:  # no prompt fits, whatever the truncation
            room = limit - (max(prompt_tokens) if self.truncation == "error" else 1)
            fewer = f"--gen_kwargs max_gen_toks=N with N <= {room} {wins}, or " if room >= 1 else ""
            raise ConfigError(
                f"task {requests[0].task_name or '?'}: max_gen_toks={new_tokens} leaves no "
                f"room for a prompt within max_length={limit}; pass {fewer}{longer}"
            )
        if self.truncation != "error":
            return
        for request, tokens in zip(requests, prompt_tokens, strict=True):
            if tokens + new_tokens > limit:
                room = limit - tokens
                fewer = f", --gen_kwargs max_gen_toks=N with N <= {room} {wins}" if room > 0 else ""
                raise ConfigError(
                    f"task {request.task_name or '?'} (doc {request.doc_id}): a prompt of "
                    f"{tokens} tokens + max_gen_toks={new_tokens} exceed max_length={limit}; "
                    f"pass {longer}{fewer}, or truncation=left to drop the prompt's oldest tokens"
                )

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        """None: a lit_sparse model has no chat template (asking for one is an error)."""
        if chat_template:
            raise ConfigError(NO_CHAT_TEMPLATE)
        return None

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True) -> str:
        raise ConfigError(NO_CHAT_TEMPLATE)

    def _generation_options(self, gen_kwargs: dict) -> dict[str, Any]:
        """generate_text's arguments from a request's generation kwargs."""
        kwargs = dict(normalize_gen_kwargs(dict(gen_kwargs), self.max_gen_toks))
        unknown = sorted(set(kwargs) - GENERATION_KEYS)
        if unknown:
            raise ConfigError(
                f"generation kwargs {', '.join(unknown)}: not supported by the lit_sparse model; "
                f"supported: {', '.join(sorted(GENERATION_KEYS))}"
            )
        until = kwargs["until"]
        sampled = bool(kwargs.get("do_sample")) and float(kwargs.get("temperature", 0)) > 0
        return {
            "max_new_tokens": int(kwargs["max_gen_toks"]),
            "stop": [until] if isinstance(until, str) else list(until or []),
            "temperature": float(kwargs.get("temperature", 1.0)) if sampled else 0.0,
            "top_k": kwargs.get("top_k") if sampled else None,
            "top_p": kwargs.get("top_p") if sampled else None,
            "seed": kwargs.get("seed") if sampled else None,
            "batch_size": self.batch_size,
            "max_length": self._max_length,
            "truncation": self.truncation,
        }

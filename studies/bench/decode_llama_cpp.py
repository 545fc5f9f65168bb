"""``bench decode --llama-cpp``: llama.cpp (through llama-cpp-python) on the bench's dense
model, one token after a long context, beside lit_sparse's decoding step.

Rows (the names are the bench's plugin names): ``llama_cpp_f32`` and ``llama_cpp_q8_0``, the
dense model's weights written as a GGUF file (:mod:`lit_sparse.formats.gguf`; q8_0: blocks of
32 int8 weights and an f16 scale, a matrix whose rows are not a multiple of 32 in f16) with a
byte-level vocabulary padded to the model's, loaded with the thread count of the process
(``--threads``, else torch's) and llama.cpp's flash attention (``-fa``, its own default on a
CPU); ``llama_cpp_f32_nofa`` and ``llama_cpp_q8_0_nofa`` the same with flash attention off
(its CPU flash-attention path can be the slower one, ggml-org/llama.cpp#27086).

The context is computed, not filled at random as lit_sparse's caches are (llama.cpp offers no
way to fill its cache): C random token ids are evaluated as a prompt, in batches of 512, into
llama.cpp's cache (f16 keys and values, every past row). The q8_0 row starts from a copy of
the f32 row's cache with the same flash-attention setting (llama.cpp's state, which holds no
weights; flash attention stores the values in another layout) instead of computing it again:
what a step costs does not depend on the cached values. A timed step evaluates one token and
takes the argmax of its logits (lit_sparse's step ends with that argmax too).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

__all__ = ["LLAMA_CPP_ROWS", "LlamaCppRow", "open_llama"]

LLAMA_CPP_ROWS = ("llama_cpp_f32", "llama_cpp_q8_0", "llama_cpp_f32_nofa", "llama_cpp_q8_0_nofa")
NO_FLASH = "_nofa"
"""The suffix of a row run with llama.cpp's flash attention off."""
MIN_VOCAB = 258
"""The byte-level vocabulary written into the bench's GGUF (256 bytes, a merge, an EOS)."""
PROMPT_BATCH = 512
KV_BYTES = 2  # llama.cpp's default cache type: f16


def open_llama(path, **options):
    """``llama_cpp.Llama`` on a GGUF file, with llama.cpp's extra weight buffers (its AMX and
    repacked layouts) off on a CPU with AMX-INT8: there llama.cpp's AMX matrix product crashes
    the process on quantized weights (a segmentation fault in ``ggml_backend_amx_mul_mat``,
    seen here with q8_0 on a Xeon; upstream ggml-org/llama.cpp#20824), and llama-cpp-python has
    no option for it but the model parameters' default, which is swapped for the load."""
    import llama_cpp
    from llama_cpp import llama_cpp as api

    if b"AMX_INT8 = 1" not in api.llama_print_system_info():
        return llama_cpp.Llama(str(path), **options)
    defaults = api.llama_model_default_params

    def without_extra_buffers():
        params = defaults()
        params.use_extra_bufts = False
        return params

    api.llama_model_default_params = without_extra_buffers
    try:
        return llama_cpp.Llama(str(path), **options)
    finally:
        api.llama_model_default_params = defaults


class LlamaCppRow:
    """One llama.cpp row at one context: the GGUF of ``network`` (dense) loaded, ``context``
    prompt tokens evaluated (or the cache of another row's, ``state``: :meth:`state`);
    ``step()`` decodes one token greedily."""

    def __init__(
        self, name: str, network, context: int, total_tokens: int, threads: int, state=None
    ):
        import llama_cpp
        import numpy as np

        from lit_sparse.formats import byte_vocab, write_gguf

        self.name, self.network = name, network
        self.flash_attn = not name.endswith(NO_FLASH)
        gguf_type = name.removeprefix("llama_cpp_").removesuffix(NO_FLASH)
        with tempfile.TemporaryDirectory(prefix="lit_sparse_gguf_") as folder:
            path = Path(folder) / f"bench-{gguf_type}.gguf"
            self.weight_bytes = write_gguf(network, path, byte_vocab(), gguf_type)
            self.llm = open_llama(
                path,
                n_ctx=context + total_tokens + 1,
                n_batch=PROMPT_BATCH,
                n_ubatch=PROMPT_BATCH,
                n_threads=threads,
                n_threads_batch=threads,
                flash_attn=self.flash_attn,
                logits_all=False,
                verbose=False,
            )  # the file is mapped: the mapping outlives its name
        self._logits = llama_cpp.llama_get_logits
        self._vocab = self.llm.n_vocab()
        self._np = np
        if state is None:
            prompt = np.random.default_rng(0).integers(0, network.config.vocab_size, context)
            self.llm.eval(prompt.tolist())
        else:
            self.llm.load_state(state)
        self.token = 0

    def state(self):
        """The context's cache (llama-cpp-python's ``LlamaState``), for another row of the
        same shape."""
        return self.llm.save_state()

    def step(self) -> None:
        self.llm.eval([self.token])
        logits = self._np.ctypeslib.as_array(self._logits(self.llm.ctx), shape=(self._vocab,))
        self.token = int(logits.argmax())

    @property
    def rows(self) -> int:
        """The cache's rows a layer (llama.cpp's context, rounded up by llama.cpp)."""
        return self.llm.n_ctx()

    @property
    def cache_mb(self) -> float:
        config = self.network.config
        per_row = 2 * config.n_layers * config.n_kv_heads * config.head_dim * KV_BYTES
        return self.rows * per_row / 2**20

    def describe(self) -> str:
        flash = "flash attention" if self.flash_attn else "no flash attention"
        return f"llama.cpp KV cache (f16): {self.rows} rows a layer, {flash}"

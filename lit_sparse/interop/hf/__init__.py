"""lit_sparse models in Hugging Face transformers (the ``hf`` extra): ``LitSparseConfig``,
``LitSparseForCausalLM`` (``generate`` decodes through each attention pattern's own bounded
cache, ``LitSparseCache``) and their registration.

Importing this package registers the classes with ``AutoConfig`` and ``AutoModelForCausalLM``
(model type ``lit_sparse``), so a lit_sparse folder loads without remote code; ``import
lit_sparse`` alone does not import transformers, so it stays light and works without the extra.
Without transformers, or with one older than the minimum, importing this raises one line.
"""

from lit_sparse.interop.extras import (
    MIN_TRANSFORMERS,
    MissingExtraError,
    require_transformers,
)

require_transformers()

from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

from lit_sparse.interop.hf.cache import LitSparseCache, LitSparseCacheLayer  # noqa: E402
from lit_sparse.interop.hf.configuration import LitSparseConfig  # noqa: E402
from lit_sparse.interop.hf.modeling import (  # noqa: E402
    LitSparseForCausalLM,
    LitSparsePreTrainedModel,
)

__all__ = [
    "MIN_TRANSFORMERS",
    "LitSparseCache",
    "LitSparseCacheLayer",
    "LitSparseConfig",
    "LitSparseForCausalLM",
    "LitSparsePreTrainedModel",
    "MissingExtraError",
    "register",
    "require_transformers",
]


def register() -> None:
    """``AutoConfig`` and ``AutoModelForCausalLM`` know model type ``lit_sparse`` (done on
    import; calling it again is harmless)."""
    AutoConfig.register(LitSparseConfig.model_type, LitSparseConfig, exist_ok=True)
    AutoModelForCausalLM.register(LitSparseConfig, LitSparseForCausalLM, exist_ok=True)


register()

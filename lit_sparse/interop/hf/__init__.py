"""lit_sparse models in transformers (the ``hf`` extra): ``LitSparseConfig`` and
``LitSparseForCausalLM``, whose ``generate`` decodes through each pattern's ``LitSparseCache``.
Importing this package registers them with the Auto classes (a folder loads without remote
code); ``import lit_sparse`` alone never imports transformers."""

from lit_sparse.interop.extras import MIN_TRANSFORMERS, MissingExtraError, require_transformers

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
    """Register model type ``lit_sparse`` with the Auto classes (done on import; idempotent)."""
    AutoConfig.register(LitSparseConfig.model_type, LitSparseConfig, exist_ok=True)
    AutoModelForCausalLM.register(LitSparseConfig, LitSparseForCausalLM, exist_ok=True)


register()

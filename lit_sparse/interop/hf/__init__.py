"""lit_sparse models in transformers (the ``hf`` extra): ``LitSparseConfig`` and
``LitSparseForCausalLM``, whose ``generate`` decodes through each pattern's ``LitSparseCache``.
Importing this package registers them with the Auto classes (a folder loads without remote
code); ``import lit_sparse`` alone never imports transformers."""

# ruff: noqa: E402 (transformers is imported once require_transformers() has passed)
from lit_sparse._lazy import reexported
from lit_sparse.interop.extras import MIN_TRANSFORMERS as MIN_TRANSFORMERS
from lit_sparse.interop.extras import MissingExtraError as MissingExtraError
from lit_sparse.interop.extras import require_transformers as require_transformers

require_transformers()

from transformers import AutoConfig, AutoModelForCausalLM

from lit_sparse.interop.hf.cache import LitSparseCache as LitSparseCache
from lit_sparse.interop.hf.cache import LitSparseCacheLayer as LitSparseCacheLayer
from lit_sparse.interop.hf.configuration import LitSparseConfig as LitSparseConfig
from lit_sparse.interop.hf.modeling import CACHE_ARGUMENT as CACHE_ARGUMENT
from lit_sparse.interop.hf.modeling import LitSparseForCausalLM as LitSparseForCausalLM
from lit_sparse.interop.hf.modeling import LitSparsePreTrainedModel as LitSparsePreTrainedModel

__all__ = sorted([*reexported(__name__), "register"])


def register() -> None:
    """Register model type ``lit_sparse`` with the Auto classes (done on import; idempotent)."""
    AutoConfig.register(LitSparseConfig.model_type, LitSparseConfig, exist_ok=True)
    AutoModelForCausalLM.register(LitSparseConfig, LitSparseForCausalLM, exist_ok=True)


register()

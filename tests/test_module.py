"""The LightningModule: parameter groups, its optimizer's LR schedule, the batch check, loading."""

import math
import sys

import pytest
import torch

from lit_sparse import FibonacciAttention, ModelConfig
from lit_sparse.metrics import TokenNLL
from lit_sparse.module import LitLanguageModel
from lit_sparse.schedule import warmup_cosine

TINY = ModelConfig(
    vocab_size=64, context_length=32, n_layers=2, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16
)


@pytest.mark.parametrize(
    ("step", "lr"),
    [(0, 3e-4 / 300), (299, 3e-4), (300, 3e-4), (6649, 1.65e-4), (12999, 3e-5), (14000, 3e-5)],
)
def test_lr_matches_the_recipe(step, lr):
    configured = LitLanguageModel(TINY).configure_optimizers()
    optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    for _ in range(step):
        optimizer.step()
        scheduler.step()
    assert scheduler.get_last_lr()[0] == pytest.approx(lr, rel=1e-6)
    assert 3e-4 * warmup_cosine(step, 300, 13000, 0.1) == pytest.approx(lr, rel=1e-6)


@pytest.mark.slow
def test_adamw8bit_is_bitsandbytes_with_the_same_groups_and_schedule():
    pytest.importorskip("bitsandbytes")
    from bitsandbytes.optim import AdamW8bit

    module = LitLanguageModel(TINY, FibonacciAttention(schedule="learned"), optimizer="adamw8bit")
    configured = module.configure_optimizers()
    optimizer = configured["optimizer"]
    assert isinstance(optimizer, AdamW8bit)
    decay, no_decay = optimizer.param_groups
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.1, 0.0)
    assert optimizer.defaults["betas"] == (0.9, 0.95)
    loss = module.model(torch.randint(0, 64, (2, 32))).float().pow(2).mean()
    loss.backward()
    before = module.model.embedding.weight.detach().clone()
    optimizer.step()  # a real 8-bit step on this device
    assert not torch.equal(before, module.model.embedding.weight)


def test_adamw8bit_without_bitsandbytes_is_refused_before_any_work(monkeypatch):
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # import fails
    with pytest.raises(ValueError, match=r"adamw8bit' needs bitsandbytes.*lit_sparse\[bnb\]"):
        LitLanguageModel(TINY, optimizer="adamw8bit")


def test_no_decay_on_norms_and_alpha():
    module = LitLanguageModel(TINY, FibonacciAttention(schedule="learned"))
    decay, no_decay = module.configure_optimizers()["optimizer"].param_groups
    names = {id(p): n for n, p in module.named_parameters()}
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    no_decay_names = sorted(names[id(p)] for p in no_decay["params"])
    assert all("norm" in n or n.endswith("theta") for n in no_decay_names)
    assert sum(n.endswith("theta") for n in no_decay_names) == 2
    assert all(p.ndim >= 2 for p in decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(module.parameters()))
    assert module.configure_optimizers()["optimizer"].defaults["betas"] == (0.9, 0.95)


def test_checkpoint_hparams_are_plain_and_load_without_the_cli(tmp_path):
    module = LitLanguageModel(TINY, FibonacciAttention(schedule="coprime", window=4))
    assert module.hparams["arch"] == TINY.to_dict()
    assert module.hparams["attention"]["class_path"].endswith("FibonacciAttention")
    path = tmp_path / "m.ckpt"
    torch.save(
        {
            "state_dict": module.state_dict(),
            "hyper_parameters": dict(module.hparams),
            "pytorch-lightning_version": "2.6.0",
        },
        path,
    )
    loaded = LitLanguageModel.load_from_checkpoint(path, weights_only=True)
    assert loaded.model.attention == module.model.attention
    for key, value in module.state_dict().items():
        assert torch.equal(value, loaded.state_dict()[key])


def test_token_nll_is_the_cross_entropy_per_position():
    module = LitLanguageModel(TINY)
    x, y = torch.randint(0, 64, (2, 10)), torch.randint(0, 64, (2, 10))
    nll = module.token_nll(x, y)
    log_probs = torch.log_softmax(module(x), dim=-1)
    torch.testing.assert_close(nll, -log_probs.gather(-1, y[..., None])[..., 0])


@pytest.mark.parametrize(
    ("field", "value"),
    [("lr", 0.0), ("min_lr_ratio", 1.5), ("warmup_steps", -1), ("weight_decay", -0.1)],
)
def test_bad_hyperparameters_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"{field}={value}"):
        LitLanguageModel(TINY, **{field: value})


def test_val_ppl_is_exp_of_the_mean_loss_over_sets(monkeypatch):
    """Issue 47: ``val/ppl`` was the mean of the sets' perplexities (212.0 and 4.63 gave
    108.3); every Lightning and HF user reads it as exp(loss), 31.3 there. Each set keeps its
    own ``val/ppl/<set>``."""
    from types import SimpleNamespace

    from lightning.pytorch.trainer.states import TrainerFn

    module = LitLanguageModel(TINY)
    sets = {"shakespeare": math.log(212.0), "math": math.log(4.63)}
    for name, loss in sets.items():
        module.val_nll[name] = TokenNLL()
        module.val_nll[name].update(torch.full((1, 4), loss))
    monkeypatch.setattr(module, "val_set_names", lambda: list(sets))
    module._trainer = SimpleNamespace(state=SimpleNamespace(fn=TrainerFn.VALIDATING))
    logged = {}
    monkeypatch.setattr(module, "log", lambda name, value, **_: logged.update({name: value}))
    module._log_sets("val")
    assert float(logged["val/ppl/shakespeare"]) == pytest.approx(212.0, rel=1e-5)
    assert float(logged["val/ppl/math"]) == pytest.approx(4.63, rel=1e-5)
    assert float(logged["val/loss"]) == pytest.approx(sum(sets.values()) / 2, rel=1e-5)
    assert float(logged["val/ppl"]) == pytest.approx(math.sqrt(212.0 * 4.63), rel=1e-5)  # 31.33
    assert float(logged["val/ppl"]) == pytest.approx(math.exp(float(logged["val/loss"])))


@pytest.mark.filterwarnings(r"ignore:You are trying to `self.log\(\)`")
def test_compile_trains_the_same_network_through_torch_compile(monkeypatch):
    """model.compile: the training step runs the compiled forward (dynamo compiled a graph)
    and gives the eager step's loss and gradients; validation stays eager. The graph runs
    through AOTAutograd without inductor's C++ build (minutes on a busy core); inductor's
    numerics are measured in docs/performance.md."""
    import functools

    from torch._dynamo.utils import counters

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))

    arch = ModelConfig(
        vocab_size=64, context_length=32, n_layers=2, d_model=32, n_heads=2, n_kv_heads=1,
        head_dim=16, ffn_hidden=0,
    )  # fmt: skip
    torch.manual_seed(0)
    eager = LitLanguageModel(arch, FibonacciAttention(window=2))
    compiled = LitLanguageModel(arch, FibonacciAttention(window=2), compile=True)
    compiled.load_state_dict(eager.state_dict())
    x = torch.randint(0, 64, (2, 32))
    batch = (x, torch.roll(x, -1, dims=1))
    torch._dynamo.reset()
    counters.clear()
    losses = []
    for module in (eager, compiled):
        loss = module.training_step(batch, 0)
        loss.backward()
        losses.append(loss)
    assert counters["stats"]["unique_graphs"] >= 1
    assert losses[1].item() == pytest.approx(losses[0].item(), abs=1e-5)
    for (name, a), (_, b) in zip(
        eager.named_parameters(), compiled.named_parameters(), strict=True
    ):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-4), name
    assert compiled._training_features() is compiled._training_features()  # compiled once
    assert eager._training_features() == eager.model.features


@pytest.mark.parametrize(("attention", "builds"), [("fibonacci", True), ("dense", False)])
def test_the_cpu_kernel_is_built_at_setup_not_in_the_first_step(monkeypatch, attention, builds):
    """Issue 47: the kernel's one-time build (about a minute) sat inside the first step of
    the sanity check's progress bar; setup (before any bar) builds it, for sparse patterns on
    the CPU only."""
    from types import SimpleNamespace

    from lit_sparse.attention import build_attention
    from lit_sparse.kernels import compiled

    calls = []
    monkeypatch.setattr(compiled, "available", lambda: calls.append(1) or True)
    module = LitLanguageModel(TINY, build_attention(attention))
    module._trainer = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device("cpu")))
    module.setup("fit")
    assert calls == ([1] if builds else [])
    module._trainer.strategy.root_device = torch.device("meta")  # another device: no build
    module.setup("fit")
    assert len(calls) == (1 if builds else 0)

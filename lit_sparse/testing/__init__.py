"""The plugin conformance kit: the checks every attention plugin must pass (docs/plugins.md).

Each check takes a plugin (an instance, a registry name or a ``{"class_path", "init_args"}``
dict) and returns None or raises AssertionError; :data:`CHECKS` lists them. CPU, small fp32."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lit_sparse.attention import AttentionPattern, AttentionPlugin, SlotPattern, build_attention
from lit_sparse.attention.registry import all_conformance_cases, get_attention
from lit_sparse.config import ModelConfig
from lit_sparse.io.forks import call_in_fork
from lit_sparse.kernels import sparse_attention
from lit_sparse.model import LanguageModel

__all__ = [
    "CHECKS",
    "check_causality",
    "check_checkpoint_round_trip",
    "check_config_round_trip",
    "check_decoding",
    "check_linear_memory",
    "check_prefix_consistency",
    "check_reference",
    "check_slot_bounds",
    "layer_patterns",
    "output_and_grads",
    "plugin_cases",
    "qkv",
]

PluginSpec = AttentionPlugin | str | Mapping[str, Any]

N_LAYERS, HEADS, KV_HEADS, HEAD_DIM = 2, 4, 2, 16
TRAINING_LENGTH = 64


def tiny_config(training_length: int = TRAINING_LENGTH, n_layers: int = N_LAYERS) -> ModelConfig:
    """The model the whole-model checks build: 2 layers, d_model 64, 4/2 heads of 16."""
    return ModelConfig(
        vocab_size=97,
        context_length=training_length,
        n_layers=n_layers,
        d_model=HEADS * HEAD_DIM,
        n_heads=HEADS,
        n_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
    )


def layer_patterns(
    plugin: PluginSpec, training_length: int = TRAINING_LENGTH, n_layers: int = N_LAYERS
) -> list[AttentionPattern]:
    """Every layer's pattern, layer l's parameters moved from their start by 0.37 - 0.9 l."""
    plugin = build_attention(plugin)
    plugin.check(n_layers)
    patterns = [plugin.build(layer, n_layers, training_length) for layer in range(n_layers)]
    with torch.no_grad():
        for layer, pattern in enumerate(patterns):
            for parameter in pattern.parameters():
                parameter.add_(0.37 - 0.9 * layer)
    return patterns


def qkv(length: int, batch: int = 2, seed: int = 0, dtype=torch.float32) -> list[Tensor]:
    """Random RoPE'd-like q (B, 4, T, 16) and k, v (B, 2, T, 16), requiring grad."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(batch, HEADS, length, HEAD_DIM)] + [(batch, KV_HEADS, length, HEAD_DIM)] * 2
    return [torch.randn(s, generator=gen, dtype=dtype).requires_grad_() for s in shapes]


def _name(plugin: AttentionPlugin) -> str:
    return type(plugin).name or type(plugin).__name__


def check_reference(
    plugin: PluginSpec,
    lengths: Sequence[int] = (1, 7, 64, 257),
    training_length: int = TRAINING_LENGTH,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    parameter_rtol: float = 1e-4,
) -> None:
    """The training path equals ``pattern.reference`` in its output and the gradients of q, k, v and
    the pattern's parameters, below, at and beyond the training length (``parameter_rtol``: a
    parameter's gradient sums every position, so fp32 agrees to about 1e-4)."""
    plugin = build_attention(plugin)
    for layer, pattern in enumerate(layer_patterns(plugin, training_length)):
        for length in lengths:
            q, k, v = qkv(length)
            inputs = [q, k, v, *pattern.parameters()]
            out, grads = output_and_grads(pattern, inputs)
            ref, ref_grads = output_and_grads(pattern.reference, inputs)
            where = f"{_name(plugin)} layer {layer}, T={length}"
            _assert_close(out, ref, rtol, atol, f"{where}: output")
            for name, grad, ref_grad in zip("qkv", grads[:3], ref_grads[:3], strict=True):
                _assert_close(grad, ref_grad, rtol, atol, f"{where}: d{name}")
            params = dict(pattern.named_parameters())
            for name, grad, ref_grad in zip(params, grads[3:], ref_grads[3:], strict=True):
                _assert_close(grad, ref_grad, parameter_rtol, atol, f"{where}: d{name}")


def check_causality(
    plugin: PluginSpec,
    lengths: Sequence[int] = (2, 17, 80),
    cuts: Sequence[int] | None = None,
    seed: int = 0,
    training_length: int = 32,
    whole_model: bool = True,
) -> None:
    """Changing q, k, v after position t (``cuts``, modulo the length; default three per length)
    leaves every output at positions <= t unchanged, per layer and (``whole_model``) in the
    logits."""
    plugin = build_attention(plugin)
    patterns = layer_patterns(plugin, training_length)
    for length in lengths:
        chosen = cuts if cuts is not None else (0, length // 3, length - 2)
        for cut in (c % length for c in chosen):
            for layer, pattern in enumerate(patterns):
                q, k, v = (x.detach() for x in qkv(length, seed=seed))
                changed = [_scramble_after(x, cut, seed) for x in (q, k, v)]
                with torch.no_grad():
                    before, after = pattern(q, k, v), pattern(*changed)
                _assert_close(
                    after[:, :, : cut + 1],
                    before[:, :, : cut + 1],
                    1.3e-6,
                    1e-5,
                    f"{_name(plugin)} layer {layer}, T={length}: the outputs up to position "
                    f"{cut} depend on later inputs",
                )
    if not whole_model:
        return
    model = _tiny_model(plugin, training_length)
    length = max(lengths)
    ids = torch.randint(0, 97, (2, length), generator=torch.Generator().manual_seed(seed))
    cut = length * 5 // 8
    changed = ids.clone()
    changed[:, cut:] = (changed[:, cut:] + 1) % 97
    with torch.no_grad():
        before, after = model(ids)[:, :cut], model(changed)[:, :cut]
    _assert_close(
        after, before, 1.3e-6, 1e-5, f"{_name(plugin)}: a model's logits before {cut} change"
    )


def check_prefix_consistency(
    plugin: PluginSpec,
    length: int = 300,
    prefixes: Sequence[int] = (1, 2, 7, 33, 63, 64, 65, 100, 257),
    training_length: int = TRAINING_LENGTH,
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> None:
    """Running a prefix of ``t`` tokens gives the first ``t`` rows of the run over ``length``, per
    layer and in a whole model, below and beyond the training length (decoding needs it)."""
    plugin = build_attention(plugin)
    for layer, pattern in enumerate(layer_patterns(plugin, training_length)):
        q, k, v = (x.detach() for x in qkv(length))
        with torch.no_grad():
            full = pattern(q, k, v)
            for t in prefixes:
                part = pattern(q[:, :, :t], k[:, :, :t], v[:, :, :t])
                where = f"{_name(plugin)} layer {layer}: the first {t} positions"
                _assert_close(part, full[:, :, :t], rtol, atol, f"{where} alone vs in {length}")
    model = _tiny_model(plugin, training_length)
    ids = torch.randint(0, 97, (1, length), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids)
        for t in prefixes:
            where = f"{_name(plugin)}: a model's logits of the first {t} tokens"
            _assert_close(model(ids[:, :t]), full[:, :t], rtol, atol, f"{where} vs in {length}")


def check_decoding(
    plugin: PluginSpec,
    training_length: int = TRAINING_LENGTH,
    total: int | None = None,
    prompts: Sequence[int] = (5, 250),
    atol: float = 1e-4,
) -> None:
    """Incremental decoding equals the full forward: a tiny model (batch 2) prefills a short and a
    long prompt, then decodes to ``total`` tokens (default 4x the training length) through
    ``LanguageModel.new_cache``, every position's logits within ``atol`` of the full forward's."""
    plugin = build_attention(plugin)
    total = 4 * training_length if total is None else total
    model = _tiny_model(plugin, training_length)
    ids = torch.randint(0, 97, (2, total), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        full = model(ids)
        for prompt in sorted({min(p, total - 1) for p in prompts}):
            cache = model.new_cache(2, total)
            logits = [model(ids[:, :prompt], cache)]
            logits += [model(ids[:, t : t + 1], cache) for t in range(prompt, total)]
            decoded = torch.cat(logits, dim=1)
            worst = (decoded - full).abs().amax(dim=(0, 2))  # (T,) per position
            bad = (worst > atol).nonzero()
            if len(bad):
                t = int(bad[0])
                raise AssertionError(
                    f"{_name(plugin)}: decoding after a {prompt}-token prompt differs from the "
                    f"full forward from position {t} on (|diff| {float(worst[t]):.2e} > {atol})"
                )


def check_slot_bounds(
    plugin: PluginSpec,
    lengths: Sequence[int] = (1, 2, 7, 64, 65, 257),
    training_length: int = TRAINING_LENGTH,
) -> None:
    """Every layer's slots pass ``KeySlots.check`` at each length, and the CPU kernel refuses slots
    made to read outside its inputs with a ValueError. A pattern without slots passes."""
    plugin = build_attention(plugin)
    for layer, pattern in enumerate(layer_patterns(plugin, training_length)):
        if not isinstance(pattern, SlotPattern):
            continue
        for length in lengths:
            try:
                slots = pattern.slots(length, torch.device("cpu"))
            except ValueError as err:
                raise AssertionError(f"{_name(plugin)} layer {layer}, T={length}: {err}") from err
        q, k, v = (x.detach() for x in qkv(16))
        slots = pattern.slots(16, torch.device("cpu"))
        negative = torch.tensor([-1], dtype=torch.long)
        broken = {"a negative distance": {"distances": torch.cat([slots.distances, negative])}}
        if slots.n_rungs:
            broken["a negative rung"] = {"rung_lo": slots.rung_lo.detach() - 16}
        if slots.n_absolute:
            broken["an absolute key below -1"] = {"block_keys": slots.block_keys - 16}
        for what, change in broken.items():
            bad = dataclasses.replace(slots, **change)
            try:
                sparse_attention(q, k, v, bad)
            except ValueError:
                continue
            raise AssertionError(
                f"{_name(plugin)} layer {layer}: the CPU kernel ran slots with {what} "
                "instead of refusing them (a read outside q, k, v)"
            )


def check_linear_memory(
    plugin: PluginSpec,
    lengths: tuple[int, int] = (1024, 4096),
    budget: float = 10.0,
    training_length: int = 1024,
) -> None:
    """Memory grows linearly in the length: one forward + backward at the paper's head shape (B = 1,
    8 query and 2 KV heads of 64) raises the peak by at most ``budget`` x the bytes of q, k and
    v, and from the shorter length to the longer by at most twice their ratio. Each length runs
    in a fresh process (the plugin must be importable by its class path)."""
    plugin = build_attention(plugin)
    rises = peak_rises_mb(plugin, sorted(lengths), training_length)
    _check_memory_rises(_name(plugin), rises, budget)


def _check_memory_rises(name: str, rises: Mapping[int, float], budget: float) -> None:
    short, long = sorted(rises)
    for length, rise in rises.items():
        allowed = budget * length * (8 + 2 + 2) * 64 * 4 / 2**20  # x the MB of q, k, v
        assert rise <= allowed, (
            f"{name}: one forward + backward at T={length} raised the peak memory by "
            f"{rise:.0f} MB, more than {budget:g} x its q, k, v ({allowed:.0f} MB)"
        )
    growth, ratio = rises[long] / max(rises[short], 1.0), long / short
    assert growth <= 2 * ratio, (
        f"{name}: the peak memory rose {growth:.1f}x from T={short} to T={long} "
        f"({rises[short]:.0f} MB to {rises[long]:.0f} MB): faster than linear ({ratio:g}x)"
    )


def check_config_round_trip(plugin: PluginSpec) -> None:
    """``to_config()`` is plain data that builds an equal plugin, directly and through the CLI's
    parser, and a registered plugin is found by its name."""
    import yaml

    from lit_sparse.parsing.config_files import model_parser

    plugin = build_attention(plugin)
    config = plugin.to_config()
    assert set(config) == {"class_path", "init_args"}, f"to_config() gave {sorted(config)}"
    assert build_attention(config) == plugin, f"{config} builds {build_attention(config)!r}"
    text = yaml.safe_dump(config)
    assert build_attention(yaml.safe_load(text)) == plugin, f"{text} does not round-trip"
    parsed = model_parser().parse_object({"model": {"attention": config}}).model.attention
    from_cli = build_attention(parsed.as_dict())
    assert from_cli == plugin, f"the CLI's parser turns {config} into {from_cli!r}"
    if type(plugin).name:
        assert get_attention(type(plugin).name) is type(plugin)


def check_checkpoint_round_trip(plugin: PluginSpec, steps: int = 2) -> None:
    """A model trained ``steps`` steps under a Lightning Trainer loads back from its checkpoint
    (weights only, no CLI) with the same plugin, weights, buffers and logits."""
    import lightning.pytorch as pl

    from lit_sparse.module import LitLanguageModel
    from lit_sparse.runs.checkpoints import AtomicCheckpointIO

    plugin = build_attention(plugin)
    torch.manual_seed(0)
    module = LitLanguageModel(tiny_config(), plugin, warmup_steps=1, max_steps=steps, lr=1e-2)
    ids = torch.randint(0, 97, (8, TRAINING_LENGTH + 1), generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(ids[:, :-1], ids[:, 1:]), batch_size=4
    )
    with tempfile.TemporaryDirectory() as folder:
        trainer = pl.Trainer(
            default_root_dir=folder,
            accelerator="cpu",
            devices=1,
            max_steps=steps,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=0,
            plugins=[AtomicCheckpointIO()],
        )
        with warnings.catch_warnings():  # no validation here, on purpose
            warnings.filterwarnings("ignore", message=".*`validation_step` but have no")
            trainer.fit(module, train_dataloaders=loader)
        path = Path(folder) / "plugin.ckpt"
        trainer.save_checkpoint(path)
        loaded = LitLanguageModel.load_from_checkpoint(path, weights_only=True)
    name = _name(plugin)
    assert loaded.model.attention == plugin, f"{name}: loaded {loaded.model.attention!r}"
    saved, restored = module.state_dict(), loaded.state_dict()
    assert saved.keys() == restored.keys(), f"{name}: {sorted(saved.keys() ^ restored.keys())}"
    for key, value in saved.items():
        assert torch.equal(value, restored[key]), f"{name}: {key} differs after loading"
    module.eval(), loaded.eval()
    with torch.no_grad():
        assert torch.equal(module(ids[:2, :-1]), loaded(ids[:2, :-1])), f"{name}: logits differ"


CHECKS: tuple[Callable[..., None], ...] = (
    check_reference,
    check_causality,
    check_prefix_consistency,
    check_decoding,
    check_slot_bounds,
    check_linear_memory,
    check_config_round_trip,
    check_checkpoint_round_trip,
)
"""Every check, for ``pytest.mark.parametrize("check", CHECKS)`` (ids: the names)."""


def plugin_cases(window: int, n_layers: int = N_LAYERS) -> dict[str, AttentionPlugin]:
    """Every registered plugin's ``conformance_cases(window, n_layers)``: case id -> plugin."""
    return all_conformance_cases(window, n_layers)


def _tiny_model(plugin: PluginSpec, training_length: int = 32) -> LanguageModel:
    torch.manual_seed(0)
    return LanguageModel(tiny_config(training_length), build_attention(plugin)).eval()


def output_and_grads(path, inputs: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
    """``path(q, k, v)`` and the gradients of ``inputs`` (q, k, v, parameters; zero if unused)."""
    out = path(*inputs[:3])
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    grads = torch.autograd.grad((out * weights).sum(), inputs, allow_unused=True)
    return out, [
        torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads, strict=True)
    ]


def _scramble_after(x: Tensor, cut: int, seed: int) -> Tensor:
    gen = torch.Generator().manual_seed(seed + 1)
    changed = x.clone()
    tail = changed[:, :, cut + 1 :]
    tail.copy_(torch.randn(tail.shape, generator=gen) * 3)
    return changed


def _assert_close(actual: Tensor, expected: Tensor, rtol: float, atol: float, what: str) -> None:
    torch.testing.assert_close(
        actual, expected, rtol=rtol, atol=atol, msg=lambda error: f"{what}: {error}"
    )


_MEMORY_SCRIPT = (
    "import sys; from lit_sparse.testing import _memory_child; _memory_child(sys.argv[1])"
)

FORKS_FOR_PEAKS = sys.platform == "linux" and hasattr(os, "fork")
"""Whether one fresh process measures every length in forks of itself (one torch import)."""


def peak_rises_mb(
    plugin: AttentionPlugin, lengths: Sequence[int], training_length: int, path: str = "training"
) -> dict[int, float]:
    """length -> the peak memory's rise (MB) over one forward + backward of the last layer's pattern
    (``path`` "reference": its dense reference), each length in a fork of one fresh process
    (:data:`FORKS_FOR_PEAKS`) or a fresh process of its own."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    spec = {"config": plugin.to_config(), "training_length": training_length, "path": path}
    groups = [list(lengths)] if FORKS_FOR_PEAKS else [[length] for length in lengths]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _MEMORY_SCRIPT, json.dumps({**spec, "lengths": group})],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for group in groups
    ]
    rises = {}
    for group, child in zip(groups, children, strict=True):
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, f"the memory measurement at T={group} failed:\n{err[-3000:]}"
        measured = json.loads(out.strip().splitlines()[-1])
        rises.update({int(length): mb for length, mb in measured.items()})
    return rises


def _memory_child(argument: str) -> None:
    """In a fresh process: per length (in a fork unless alone), the resident peak's rise."""
    spec = json.loads(argument)
    if len(spec["lengths"]) == 1:
        print(json.dumps({spec["lengths"][0]: _peak_rise_mb(spec, spec["lengths"][0])}))
        return
    rises = {}
    for length in spec["lengths"]:
        try:
            rises[length] = call_in_fork(_peak_rise_mb, spec, length)
        except ChildProcessError as err:
            raise SystemExit(f"the measurement at T={length} failed: {err}") from None
    print(json.dumps(rises))


def _peak_rise_mb(spec: dict[str, Any], length: int) -> float:
    torch.manual_seed(0)
    plugin = build_attention(spec["config"])
    pattern = plugin.build(N_LAYERS - 1, N_LAYERS, spec["training_length"])
    run = pattern if spec["path"] == "training" else pattern.reference
    q, k, v = (torch.randn(1, heads, length, 64, requires_grad=True) for heads in (8, 2, 2))
    run(q[:, :, :64], k[:, :, :64], v[:, :, :64]).sum().backward()  # warm-up
    before = _reset_peak_kb()
    run(q, k, v).sum().backward()
    return (_peak_kb() - before) / 1024


def _reset_peak_kb() -> int:
    """Reset the peak to the current resident set (Linux) and return it; else the peak so far."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    return _peak_kb()


def _peak_kb() -> int:
    """The resident set's peak: Linux's VmHWM (which ``_reset_peak_kb`` resets), else maxrss."""
    try:
        found = re.search(r"^VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    except OSError:
        found = None
    if found:
        return int(found.group(1))
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

"""Hybrid stacks: a local plugin on most layers and a global one on a few (Gemma 3's five
sliding-window layers to one global, Cohere's NoPE global layers), as one plugin that asks the
plugin serving a layer to build it."""

from __future__ import annotations

from typing import Any

from lit_sparse.attention.base import AttentionPattern, AttentionPlugin
from lit_sparse.attention.registry import build_attention, register_attention
from lit_sparse.errors import ConfigError

DEFAULT_EVERY = 4
"""The period when neither ``every`` nor ``global_layers`` is given: a global layer in four."""


@register_attention("hybrid")
class HybridAttention(AttentionPlugin):
    """A hybrid stack: a global plugin on a few layers, a local plugin on the rest.

    The global layers are every k-th or a list. A plugin's per-layer options run over the
    layers it holds: a Fibonacci schedule's layer l of n is the l-th of its n layers, so a
    linear ramp spans the local layers whatever the global layers' positions."""

    def __init__(
        self,
        local_attention: AttentionPlugin | None = None,
        global_attention: AttentionPlugin | None = None,
        every: int | None = None,
        first: int | None = None,
        global_layers: list[int] | None = None,
        global_rope: bool = True,
    ):
        """
        Args:
            local_attention: the plugin of the local layers (default: fibonacci).
            global_attention: the plugin of the global layers (default: dense).
            every: a global layer every k layers (Gemma 3's 5:1 is 6); with neither this nor
                global_layers, every 4.
            first: the first global layer of the period (0 <= first < every; default
                every - 1: the last layer of each period is global).
            global_layers: the global layers by index instead (negative counts from the end:
                -1 is the last), as transformers' layer_types; leave every and first out.
            global_rope: rotate the global layers' q and k (False: NoPE global layers, as
                Cohere's hybrids; the local layers keep RoPE).
        """
        self.local_attention = _plugin("local_attention", local_attention, "fibonacci")
        self.global_attention = _plugin("global_attention", global_attention, "dense")
        self.every, self.first, self.global_layers = every, first, global_layers
        self.global_rope = global_rope
        if global_layers is not None:
            if every is not None or first is not None:
                raise ConfigError(
                    f"global_layers={global_layers!r} with every={every!r}, first={first!r}: "
                    "name the global layers one way, a list or a period"
                )
            if isinstance(global_layers, str | bytes) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in global_layers
            ):
                raise ConfigError(
                    f"global_layers must be a list of layer indices, got {global_layers!r}"
                )
            return
        self._period()  # checked here, before any model

    # ------------------------------------------------------------------ layers
    def _period(self) -> tuple[int, int]:
        """(every, first) of the period form, defaults filled in (ConfigError naming either)."""
        period = DEFAULT_EVERY if self.every is None else self.every
        if isinstance(period, bool) or not isinstance(period, int) or period < 1:
            raise ConfigError(f"every must be an integer >= 1, got {self.every!r}")
        start = period - 1 if self.first is None else self.first
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < period:
            raise ConfigError(
                f"first must be an integer in 0..{period - 1} (below every), got {self.first!r}"
            )
        return period, start

    def global_layer_indices(self, n_layers: int) -> list[int]:
        """The global layers of a model of ``n_layers`` layers, ascending (ConfigError naming
        the option for an index out of range, a layer named twice, or no layer at all)."""
        if self.global_layers is None:
            period, start = self._period()
            layers = list(range(start, n_layers, period))
            if not layers:
                raise ConfigError(
                    f"every={period}, first={start}: no global layer in a model of {n_layers} "
                    f"layers (the first would be layer {start}); choose every <= {n_layers}"
                )
            return layers
        layers = []
        for index in self.global_layers:
            if not -n_layers <= index < n_layers:
                raise ConfigError(
                    f"global_layers: layer {index} is out of range for a model of {n_layers} "
                    f"layers (allowed: 0..{n_layers - 1}, or -{n_layers}..-1 from the end)"
                )
            layer = index % n_layers
            if layer in layers:
                raise ConfigError(
                    f"global_layers={self.global_layers!r}: layer {layer} is named twice (one "
                    "plugin a layer)"
                )
            layers.append(layer)
        if not layers:
            raise ConfigError("global_layers=[]: name at least one global layer")
        return sorted(layers)

    def layer_plugins(self, n_layers: int) -> list[tuple[str, AttentionPlugin, int, int]]:
        """Per layer: ("local" or "global", its plugin, its index among that plugin's layers,
        that plugin's layer count)."""
        global_layers = self.global_layer_indices(n_layers)
        local_layers = [layer for layer in range(n_layers) if layer not in global_layers]
        out = []
        for layer in range(n_layers):
            if layer in global_layers:
                held = ("global", self.global_attention, global_layers)
            else:
                held = ("local", self.local_attention, local_layers)
            kind, plugin, layers = held
            out.append((kind, plugin, layers.index(layer), len(layers)))
        return out

    def check(self, n_layers: int) -> None:
        global_count = len(self.global_layer_indices(n_layers))
        local_count = n_layers - global_count
        if local_count == 0:
            raise ConfigError(
                f"every layer of the {n_layers} is global: no layer is left for local_attention "
                "(use the global plugin itself, or fewer global layers)"
            )
        for field, plugin, count in (
            ("local_attention", self.local_attention, local_count),
            ("global_attention", self.global_attention, global_count),
        ):
            try:
                plugin.check(count)
            except ValueError as err:
                held = f"it holds {count} of the {n_layers} layers"
                raise ConfigError(f"{field}: {err} ({held})") from None

    def build(self, layer: int, n_layers: int, training_length: int) -> AttentionPattern:
        kind, plugin, index, count = self.layer_plugins(n_layers)[layer]
        pattern = plugin.build(index, count, training_length)
        if kind == "global" and not self.global_rope:
            pattern.rotary = False
        return pattern

    # ------------------------------------------------------------------ the policy beyond T
    def new_offsets_policy(self) -> str | None:
        policies = (p.new_offsets_policy() for p in (self.local_attention, self.global_attention))
        return next((p for p in policies if p is not None), None)

    def with_new_offsets(self, policy: str) -> HybridAttention:
        rebuilt = {
            field: plugin.with_new_offsets(policy)
            if plugin.new_offsets_policy() is not None
            else plugin
            for field, plugin in (
                ("local_attention", self.local_attention),
                ("global_attention", self.global_attention),
            )
        }
        return type(self)(**{**self._options(), **rebuilt})

    # ------------------------------------------------------------------ the test kits
    @classmethod
    def conformance_cases(cls, window: int, n_layers: int) -> dict[str, AttentionPlugin]:
        """A staggered Fibonacci stack with a NoPE dense layer, the last (the kit's models have
        two layers: one of each; each plugin's own cases cover its patterns)."""
        fibonacci = build_attention("fibonacci", window=window, schedule="linear")
        return {"hybrid": cls(fibonacci, global_layers=[-1], global_rope=False)}

    @classmethod
    def bench_cases(cls, keys: int, window: int) -> dict[str, AttentionPlugin]:
        """Fibonacci (fixed, window W) local layers with a dense layer in four: layers 1, 5,
        9, ... (one at any depth >= 2: the kit's 2-layer models, the paper's 16 layers)."""
        fibonacci = build_attention("fibonacci", window=window)
        return {"hybrid": cls(fibonacci, every=4, first=1)}


def _plugin(field: str, value: Any, default: str) -> AttentionPlugin:
    """``value`` (a plugin, name, class path or config; None: ``default``) as a plugin; a
    hybrid inside a hybrid is refused."""
    plugin = build_attention(default if value is None else value)
    if isinstance(plugin, HybridAttention):
        raise ConfigError(f"{field}: a hybrid cannot hold a hybrid; give a local or global plugin")
    return plugin

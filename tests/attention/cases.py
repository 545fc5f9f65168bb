"""Plugin configurations every attention test runs over; each registered name must appear."""

from lit_sparse import build_attention


def plugin_cases(window: int, n_layers: int = 2) -> dict[str, object]:
    """id -> plugin, for one window size (custom alphas sized for ``n_layers``)."""
    fib = {
        f"fibonacci-{schedule}-{rungs}": build_attention(
            "fibonacci", window=window, schedule=schedule, rungs=rungs
        )
        for schedule in ("fixed", "linear", "coprime", "learned")
        for rungs in ("fibonacci", "pow2")
    }
    return {
        "dense": build_attention("dense"),
        **fib,
        "fibonacci-custom": build_attention(
            "fibonacci",
            window=window,
            schedule="custom",
            alphas=[0.6 + 0.85 * i / max(1, n_layers - 1) for i in range(n_layers)][::-1],
        ),
        "sliding_window": build_attention("sliding_window", window=window),
        "bigbird": build_attention(
            "bigbird", window=window, n_global=3, n_random=5, block_size=16, seed=1
        ),
    }

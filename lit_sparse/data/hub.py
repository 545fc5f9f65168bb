"""Hugging Face hub access: a fast reachability probe and one clear error.

``datasets`` retries for about 24 s when the hub is unreachable, so we probe first and raise
:class:`DataSourceUnavailable`, one line naming the source and the offline alternative."""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlparse

from lit_sparse.errors import LitSparseError, find_error

OFFLINE_HINT = (
    "to train offline, add --config configs/quickstart.yaml (the small CPU run on the embedded "
    "Shakespeare + math corpus, a few minutes) or --data configs/data/embedded.yaml (this model "
    "on the embedded corpus, no download), or point the sources at local files; to go online, "
    "let the hub answer (unset HF_HUB_OFFLINE and HF_DATASETS_OFFLINE; behind a proxy set "
    "HTTPS_PROXY) and run the same command again: the data is tokenized into the token cache once"
)
"""What to do instead, in the exact options: the end of every hub-unavailable message."""
# the connection errors of requests, httpx, urllib and huggingface_hub, by class name
_NETWORK_ERRORS = set(
    "TransportError NetworkError ConnectError TimeoutException ConnectionError Timeout SSLError "
    "URLError".split()
)


class DataSourceUnavailable(LitSparseError, RuntimeError):
    """A data source or tokenizer needs the Hugging Face hub and the hub cannot be reached."""


def find_unavailable(err: BaseException | None) -> DataSourceUnavailable | None:
    """The :class:`DataSourceUnavailable` in ``err``'s cause/context chain, else None."""
    return find_error(err, DataSourceUnavailable)


def hub_endpoint() -> str:
    """The hub URL: ``$HF_ENDPOINT`` if set, else https://huggingface.co."""
    return os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co"


def _offline_flag() -> str | None:
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().upper() in {"1", "ON", "YES", "TRUE"}:
            return var
    return None


def is_network_error(err: BaseException) -> bool:
    """True for connection-level failures (refused, unresolvable, timeout, TLS), any client."""
    if isinstance(err, ConnectionError | TimeoutError | socket.gaierror):
        return True
    return any(c.__name__ in _NETWORK_ERRORS for c in type(err).__mro__)


def _head(url: str, timeout: float) -> None:
    """One HEAD request through the hub client's own session (its proxies and certificates)."""
    from huggingface_hub.utils import get_session

    get_session().head(url, timeout=timeout, follow_redirects=False)


def hub_unreachable_reason(timeout: float = 3.0) -> str | None:
    """Why the hub cannot be reached, or None if it answers any HTTP request within ``timeout``
    (in a daemon thread, so a hanging resolver cannot stretch the bound)."""
    flag = _offline_flag()
    if flag:
        return f"{flag}={os.environ[flag].strip()} is set"
    endpoint = hub_endpoint()
    host = urlparse(endpoint).netloc or endpoint
    result: list[str | None] = []

    def probe() -> None:
        try:
            _head(endpoint, timeout)
            result.append(None)
        except Exception as err:  # noqa: BLE001 (any failure means: not reachable)
            detail = str(err).splitlines()[0] if str(err) else ""
            result.append(f"{type(err).__name__}: {detail}"[:200])

    thread = threading.Thread(target=probe, daemon=True, name="hub-probe")
    thread.start()
    thread.join(timeout)
    if not result:
        return f"{host} did not answer within {timeout:g} s"
    if result[0] is not None:
        return f"{host} is unreachable ({result[0]})"
    return None


def require_hub(what: str, timeout: float = 3.0) -> None:
    """:class:`DataSourceUnavailable` (message starting with ``what``) unless the hub answers."""
    reason = hub_unreachable_reason(timeout)
    if reason is not None:
        raise DataSourceUnavailable(
            f"{what} needs the Hugging Face hub, but {reason}; {OFFLINE_HINT}"
        )

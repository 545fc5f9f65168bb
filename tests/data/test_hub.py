"""With the hub unreachable, hub sources and tokenizers fail within seconds with one clear
message naming the offline alternative; cached sources and tokenizers need no hub."""

from __future__ import annotations

import socket
import time

import pytest

import lit_sparse.data.hub as hub
import lit_sparse.data.sources as sources_mod
from lit_sparse.data import DataSourceUnavailable, SourceConfig, TextDataModule


def hub_source(**kw) -> SourceConfig:
    args = {
        "name": "fineweb_edu",
        "path": "HuggingFaceFW/fineweb-edu",
        "config_name": "sample-10BT",
        "val_tokens": 4096,
    }
    args.update(kw)
    return SourceConfig(**args)


@pytest.fixture
def online_env(monkeypatch):
    """No offline flags, no proxies, the default endpoint."""
    for var in (
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "HF_ENDPOINT",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        monkeypatch.delenv(var, raising=False)


def assert_clear(err: DataSourceUnavailable, *names: str) -> None:
    msg = str(err)
    assert "\n" not in msg
    assert "configs/data/embedded.yaml" in msg and "embedded" in msg
    # the exact options: the small offline run, the paper's model on the embedded corpus, and
    # how to go online
    assert "--config configs/quickstart.yaml" in msg and "--data configs/data/embedded.yaml" in msg
    assert "to go online" in msg and "unset HF_HUB_OFFLINE" in msg
    for n in names:
        assert n in msg, (n, msg)


def test_offline_flag_fails_fast(tmp_path, online_env, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dm = TextDataModule(sources=[hub_source()], seq_len=32, cache_dir=str(tmp_path))
    assert dm.vocab_size == 8192  # __init__ needs no hub for an embedded tokenizer
    t0 = time.perf_counter()
    with pytest.raises(DataSourceUnavailable) as info:
        dm.prepare_data()
    assert time.perf_counter() - t0 < 3
    assert_clear(info.value, "fineweb_edu", "HuggingFaceFW/fineweb-edu", "HF_HUB_OFFLINE")
    assert isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9", "https://10.255.255.1"])
def test_unreachable_endpoint_fails_within_seconds(tmp_path, online_env, monkeypatch, endpoint):
    """A refused port answers at once; an unroutable address is bounded by the 3 s probe."""
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    dm = TextDataModule(sources=[hub_source()], seq_len=32, cache_dir=str(tmp_path))
    t0 = time.perf_counter()
    with pytest.raises(DataSourceUnavailable) as info:
        dm.prepare_data()
    assert time.perf_counter() - t0 < 5
    host = endpoint.split("//")[1].split(":")[0]
    assert_clear(info.value, "fineweb_edu", host)


def test_probe_is_bounded_even_if_the_server_hangs(online_env, monkeypatch):
    monkeypatch.setattr(hub, "_head", lambda url, timeout: time.sleep(30))
    t0 = time.perf_counter()
    reason = hub.hub_unreachable_reason(timeout=0.3)
    assert time.perf_counter() - t0 < 2
    assert reason == "huggingface.co did not answer within 0.3 s"


def test_probe_success_uses_the_endpoint(online_env, monkeypatch):
    seen = []
    monkeypatch.setattr(hub, "_head", lambda url, timeout: seen.append((url, timeout)))
    assert hub.hub_unreachable_reason() is None
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.org")
    hub.require_hub("x")  # no exception
    assert seen == [("https://huggingface.co", 3.0), ("https://hub.example.org", 3.0)]


def test_network_errors_are_recognised():
    class TransportError(Exception):  # the shape of httpx's (and its forks') errors
        pass

    class ConnectError(TransportError):
        pass

    assert hub.is_network_error(ConnectionError("x"))
    assert hub.is_network_error(socket.gaierror(-2, "Name or service not known"))
    assert hub.is_network_error(ConnectError("refused"))
    assert not hub.is_network_error(ValueError("bad column"))
    assert not hub.is_network_error(FileNotFoundError("x"))


def test_connection_lost_after_the_probe(tmp_path, online_env, monkeypatch):
    import datasets

    monkeypatch.setattr(sources_mod, "require_hub", lambda what: None)

    def refuse(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'HuggingFaceFW/fineweb-edu' on the Hub\nretry")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    dm = TextDataModule(sources=[hub_source()], seq_len=32, cache_dir=str(tmp_path))
    with pytest.raises(DataSourceUnavailable) as info:
        dm.prepare_data()
    assert_clear(info.value, "fineweb_edu", "ConnectionError")


def test_cached_hub_source_needs_no_hub(tmp_path, online_env, monkeypatch, no_network):
    import datasets

    docs = [f"document {i} " + "word " * (i % 50) for i in range(400)]
    calls = []

    def fake_load(path, name=None, split=None, streaming=False, **kw):
        calls.append((path, name, split, streaming))
        return datasets.Dataset.from_dict({"text": docs}).to_iterable_dataset()

    monkeypatch.setattr(sources_mod, "require_hub", lambda what: None)
    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    dm = TextDataModule(sources=[hub_source()], seq_len=32, cache_dir=str(tmp_path))
    dm.prepare_data()
    assert calls == [("HuggingFaceFW/fineweb-edu", "sample-10BT", "train", True)]
    monkeypatch.undo()  # the real probe and load_dataset again, and the network still off

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(
        socket, "create_connection", lambda *a, **k: pytest.fail("network access attempted")
    )
    again = TextDataModule(sources=[hub_source()], seq_len=32, cache_dir=str(tmp_path))
    again.prepare_data()
    again.setup("fit")
    x, _ = next(iter(again.train_dataloader()))
    assert x.shape == (8, 32)
    assert again.val_set_names == ["fineweb_edu"]
    assert len(list(again.val_dataloader()[0])) > 0


def test_hub_tokenizer_offline_fails_fast(tmp_path, online_env, monkeypatch):
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(DataSourceUnavailable) as info:
        TextDataModule(tokenizer="hf-internal-testing/llama-tokenizer", cache_dir=str(tmp_path))
    assert time.perf_counter() - t0 < 3
    msg = str(info.value)
    assert "\n" not in msg and "hf-internal-testing/llama-tokenizer" in msg
    assert "configs/data/embedded.yaml" in msg


def test_hub_tokenizer_from_the_local_hf_cache(
    tmp_path, online_env, monkeypatch, word_tok, no_network
):
    """A hub tokenizer already in the Hugging Face cache loads without the hub."""
    import huggingface_hub.constants as c

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "models--some-org--tiny-tok"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit / "tokenizer.json").write_text(word_tok.read_text())
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf"))
    dm = TextDataModule(tokenizer="some-org/tiny-tok", cache_dir=str(tmp_path))
    assert dm.tokenizer_size == 902 and dm.vocab_size == 960

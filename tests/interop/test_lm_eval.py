"""The lit_sparse model of lm-eval: registered, its defaults read from the folder, scores and
rolling windows against a plain forward, generate_until's stop strings, and bad input one
line each (lm-eval missing names the extra)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import lit_sparse
from lit_sparse.errors import ConfigError

lm_eval = pytest.importorskip("lm_eval")
from lm_eval.api.instance import Instance  # noqa: E402

from lit_sparse.interop.lm_eval import LitSparseLM  # noqa: E402

from .conftest import TRAINING_LENGTH  # noqa: E402

pytestmark = pytest.mark.slow  # lm-eval's import alone takes seconds


@pytest.fixture(scope="module")
def lm(random_export) -> LitSparseLM:
    return LitSparseLM(pretrained=str(random_export), device="cpu", batch_size=4)


def test_the_entry_point_loads_the_model_that_lm_eval_registers():
    """The installed ``lm_eval.models`` entry point, loaded as a plugin registry loads it
    (``EntryPoint.load``), is the class lm-eval's own registry names ``lit_sparse``."""
    from importlib.metadata import entry_points

    from lm_eval.api.registry import get_model

    (point,) = entry_points(group="lm_eval.models", name="lit_sparse")
    assert point.value == "lit_sparse.interop.lm_eval:LitSparseLM"
    assert point.load() is LitSparseLM is get_model("lit_sparse")


def request(kind: str, *args, n: int = 0) -> Instance:
    return Instance(request_type=kind, doc={}, arguments=args, idx=n)


def plain_logprob(model, context: list[int], continuation: list[int]) -> float:
    tokens = torch.tensor([context + continuation])
    with torch.inference_mode():
        logprobs = model(tokens[:, :-1]).log_softmax(-1)[0]
    start = len(context) - 1
    return sum(float(logprobs[start + i, t]) for i, t in enumerate(continuation))


def test_registered_with_the_folders_defaults(lm, random_export):
    assert lm_eval.api.registry.get_model("lit_sparse") is LitSparseLM
    assert lm.max_length == TRAINING_LENGTH  # the training length, from config.json
    assert lm.eot_token_id == lm.prefix_token_id == 0 == lm.tokenizer.eos_id
    assert lm.batch_size == 4 and lm.device.type == "cpu"
    auto = LitSparseLM(pretrained=str(random_export), batch_size="auto", device="cuda:0")
    assert auto.batch_size == 16384 // TRAINING_LENGTH  # and no CUDA here: the CPU
    assert auto.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    longer = LitSparseLM(pretrained=str(random_export), max_length="128")
    assert longer.max_length == 128


def test_loglikelihood_is_the_continuations_log_probability(lm):
    (logprob, greedy), (empty, _) = lm.loglikelihood(
        [request("loglikelihood", "ROMEO: But", " soft"), request("loglikelihood", "", "ROMEO")]
    )
    encode = lm.tokenizer.encode
    whole, context = encode("ROMEO: But soft"), encode("ROMEO: But")
    assert logprob == pytest.approx(
        plain_logprob(lm.model, context, whole[len(context) :]), abs=1e-4
    )
    assert empty == pytest.approx(plain_logprob(lm.model, [0], encode("ROMEO")), abs=1e-4)
    assert isinstance(greedy, bool)


def test_rolling_windows_are_lm_evals_after_the_end_of_text_token(lm):
    """A document of 2.5 windows: [EOS] + d[:L-1] predicts d[:L]; d[L-1:2L-1] predicts
    d[L:2L]; the last window reads a full L tokens and predicts the rest."""
    from lit_sparse.evaluation.held_out_tasks import held_out_documents

    L, tokenizer = lm.max_length, lm.tokenizer
    short = "Q: What is 2 + 3?\nA: 5."
    text = held_out_documents("shakespeare")[0]["text"][:400]
    d = tokenizer.encode(text)
    d = d[: 5 * L // 2]
    text = tokenizer.decode(d)
    assert tokenizer.encode(text) == d
    expected = (
        plain_logprob(lm.model, [0], d[:L])
        + plain_logprob(lm.model, d[L - 1 : L], d[L : 2 * L])
        + plain_logprob(lm.model, d[len(d) - L - 1 : 2 * L], d[2 * L :])
    )
    got_short, got = lm.loglikelihood_rolling(
        [request("loglikelihood_rolling", short), request("loglikelihood_rolling", text, n=1)]
    )
    assert got == pytest.approx(expected, rel=1e-5)
    assert got_short == pytest.approx(
        plain_logprob(lm.model, [0], tokenizer.encode(short)), rel=1e-5
    )


def test_generate_until_stops_at_the_first_stop_string(random_export):
    lm = LitSparseLM(pretrained=str(random_export), batch_size=2, max_length=64)
    prompts = ["ROMEO:", "Q: What is 2 + 3?\nA:", "HAMLET: To be"]
    options = {"max_gen_toks": 24, "do_sample": False}
    full = lm.generate_until(
        [request("generate_until", p, {**options, "until": []}) for p in prompts]
    )
    stops = [text[5:7] for text in full]  # each text's own stop string
    assert all(len(text) > 8 and text.find(s) >= 5 for text, s in zip(full, stops, strict=True))
    requests = [
        request("generate_until", p, {**options, "until": [s, "never"]}, n=i)
        for i, (p, s) in enumerate(zip(prompts, stops, strict=True))
    ]
    requests.append(request("generate_until", prompts[0], {"until": "\n", "max_gen_toks": 3}))
    got = lm.generate_until(requests)
    assert got[:3] == [text[: text.find(s)] for text, s in zip(full, stops, strict=True)]
    assert got[3] == lit_sparse.generate_text(lm.model, lm.tokenizer, prompts[:1], 3, stop="\n")[0]


def test_max_length_below_the_prompt_is_one_line(lm):
    long_prompt = "ROMEO: " * 40
    long_request = request("generate_until", long_prompt, {"until": [], "max_gen_toks": 4})
    n = len(lm.tokenizer.encode(long_prompt))
    with pytest.raises(
        ConfigError, match=rf"a prompt of {n} tokens \+ max_gen_toks=4 exceed"
    ) as err:
        lm.generate_until([long_request])
    assert "max_length=32; pass --model_args pretrained=...,max_length=N" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"max_gen_toks=40 leaves no room for a prompt"):
        lm.generate_until([request("generate_until", "a", {"until": [], "max_gen_toks": 40})])
    with pytest.raises(ConfigError, match="generation kwargs num_beams: not supported"):
        lm.generate_until([request("generate_until", "a", {"until": [], "num_beams": 2})])


@pytest.mark.parametrize("truncation", ["error", "left"])
def test_a_tasks_max_gen_toks_past_max_length_advises_gen_kwargs(random_export, truncation):
    """Issue 36: lit_sparse_math_answer (max_gen_toks 96) on a model of 32 tokens advised
    truncation=left, which cannot work, and the max_gen_toks model argument loses to the
    task's: lm-eval's --gen_kwargs is what lowers it."""
    lm = LitSparseLM(pretrained=str(random_export), max_gen_toks=8, truncation=truncation)
    answer = Instance(
        request_type="generate_until",
        doc={},
        arguments=("Q: What is 2 + 3?\nA:", {"until": ["\n"], "max_gen_toks": 96}),
        idx=0,
        metadata=("lit_sparse_math_answer", 0, 1),
    )
    with pytest.raises(ConfigError) as err:
        lm.generate_until([answer])
    message = str(err.value)
    room = 32 - len(lm.tokenizer.encode(answer.args[0])) if truncation == "error" else 31
    assert message.startswith(
        "task lit_sparse_math_answer: max_gen_toks=96 leaves no room for a prompt within "
        f"max_length=32; pass --gen_kwargs max_gen_toks=N with N <= {room} "
    )
    assert "truncation=left" not in message and "\n" not in message


def test_asking_for_a_chat_template_is_one_line(lm):
    assert lm.chat_template(False) is None
    with pytest.raises(ConfigError, match="the lit_sparse model has no chat template"):
        lm.chat_template(True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pretrained": "nowhere"}, "model_args pretrained='nowhere': no such exported folder"),
        ({"pretrained": None}, "model_args pretrained: required"),
        ({"temperature": 1}, "model_args temperature: not options of the lit_sparse model"),
        ({"max_length": 0}, "model_args max_length=0: expected an integer >= 1"),
        ({"batch_size": "many"}, "model_args batch_size='many': expected an integer >= 1"),
        ({"truncation": "right"}, "model_args truncation='right': allowed: error, left"),
        ({"dtype": "int8"}, "dtype='int8': allowed"),
    ],
)
def test_bad_model_args_are_one_line(random_export, args, message):
    with pytest.raises(ConfigError, match=message) as err:
        LitSparseLM(**{"pretrained": str(random_export), **args})
    assert "\n" not in str(err.value)


def test_without_lm_eval_the_command_names_the_extra():
    code = (
        "import sys; sys.modules['lm_eval'] = None\n"
        "from lit_sparse.__main__ import main\n"
        "raise SystemExit(main(['lm-eval', '--model', 'lit_sparse', '--tasks', 'x']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: lm-eval is not installed")
    assert 'pip install -e ".[eval]"' in lines[0]


def test_lm_evals_noise_about_our_tasks_is_filtered(caplog):
    """Issue 47: every run warned four times (one per shipped task) that custom kwargs go to
    ``--metadata`` (lm-eval's hint for its RULER tasks, printed for any custom_dataset), and
    from the repository root that the folder ``lit_sparse`` clashes with the task tag. Both
    are dropped; lm-eval's same warnings about other tasks and folders stay."""
    import inspect
    import logging

    import lm_eval.api.task
    import lm_eval.config.evaluate_config

    # the messages as lm-eval 0.4.13 words them (a later wording would need the filter again)
    assert "Custom kwargs can be passed to `--metadata`" in inspect.getsource(lm_eval.api.task)
    assert "A local directory named" in inspect.getsource(lm_eval.config.evaluate_config)
    task, config = (
        logging.getLogger(n) for n in ("lm_eval.api.task", "lm_eval.config.evaluate_config")
    )
    hint = ": Custom kwargs can be passed to `--metadata` in console (as json string)"
    clash = "A local directory named '{}' exists but a registered task with the same name was found"
    with caplog.at_level(logging.WARNING):
        for name in ("lit_sparse_math_ppl", "lit_sparse_math_answer"):
            task.warning(name + hint)
        config.warning(clash.format("lit_sparse"))
        task.warning("ruler_niah" + hint)
        config.warning(clash.format("mmlu"))
    kept = [r.getMessage() for r in caplog.records]
    assert len(kept) == 2 and kept[0].startswith("ruler_niah:") and "'mmlu'" in kept[1], kept


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback needs no CUDA")
@pytest.mark.parametrize(("given", "warned"), [(False, False), (True, True)])
def test_no_cuda_warning_for_lm_evals_default_device(
    random_export, monkeypatch, caplog, given, warned
):
    """lm-eval's command line passes device cuda:0 when --device is not given, so every run on
    a CPU machine said "cuda:0 is not available"; only an asked-for CUDA device warns now."""
    import logging

    from lit_sparse.interop import lm_eval as interop

    monkeypatch.setattr(interop, "_cli_device_given", given)
    with caplog.at_level(logging.WARNING, logger="lit_sparse.interop.lm_eval"):
        lm = LitSparseLM(pretrained=str(random_export), device="cuda:0")
    assert lm.device.type == "cpu"
    assert any("CUDA is not available" in r.getMessage() for r in caplog.records) == warned


def test_generate_until_shows_progress(random_export, capsys):
    """generate_until ran 51 s with no output on the quickstart's task; a bar counts the
    requests (greedy results do not depend on the chunks it generates in)."""
    lm = LitSparseLM(pretrained=str(random_export), batch_size=1, max_length=64)
    prompts = [f"Q: What is {n} + 1?\nA:" for n in range(6)]
    requests = [request("generate_until", p, {"until": "\n", "max_gen_toks": 4}) for p in prompts]
    got = lm.generate_until(requests)
    err = capsys.readouterr().err
    assert "generate_until" in err and "6/6" in err
    assert got == lit_sparse.generate_text(
        lm.model, lm.tokenizer, prompts, 4, stop="\n", batch_size=6
    )
    lm.generate_until(requests, disable_tqdm=True)
    assert "generate_until" not in capsys.readouterr().err

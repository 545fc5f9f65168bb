"""``python -m lit_sparse lm-eval`` (lit_sparse/commands/lm_eval.py): options that cannot work
are one ``error:`` line and exit status 2 before lm-eval loads a task or the model (in-process:
no lm-eval run is started); lm-eval's own command line with the lit_sparse model, on a shipped
task, offline; its per-document scores against lit_sparse.score; lm-eval's ``hf`` model on an
export once the export loads in transformers.

The lm-eval runs' commands run in one interpreter of their own (:func:`lm_eval_each`): a start
costs torch's and lm-eval's imports, and each command lm-eval's index of its task files (8 s
of CPU, built once there), more than the commands themselves. The exports they read are the
interop tests' (tests/interop/conftest.py)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

import lit_sparse
from lit_sparse.evaluation.extrapolation import evaluate_lengths
from lit_sparse.interop.shipped_tasks import TASKS_DIR
from tests.command_line import command
from tests.tiny_runs import SEQ_LEN, tiny_datamodule

main = command("lm-eval")


def lm_eval_args(folder, *extra: str) -> list[str]:
    return [
        "--model", "lit_sparse",
        "--model_args", f"pretrained={folder}",
        "--device", "cpu",
        "--tasks", "lit_sparse_math_choice",
        "--include_path", str(TASKS_DIR),
        *extra,
    ]  # fmt: skip


def one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("limit", [["--limit", "0"], ["--limit=-3"], ["-L", "0.0"]])
def test_a_limit_of_no_documents_is_one_line(random_export, capsys, limit):
    """Issue 36: lm-eval raised its ValueError ("did not find any docs") after loading all."""
    assert main(lm_eval_args(random_export, *limit)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: --limit {limit[-1].split('=')[-1]}: evaluates no documents")


@pytest.mark.parametrize("template", [[], ["chatml"]])
def test_a_chat_template_is_one_line(random_export, capsys, template):
    """Issue 36: lm-eval's NotImplementedError traceback after the model had loaded."""
    assert main(["run", *lm_eval_args(random_export, "--apply_chat_template", *template)]) == 2
    assert one_error_line(capsys).startswith(
        "error: --apply_chat_template: the lit_sparse model has no chat template"
    )


LIMIT = 3
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def lm_eval(args: list[str], cwd) -> subprocess.CompletedProcess:
    """``python -m lit_sparse lm-eval ARGS`` as its own process (for a command that needs one:
    :func:`lm_eval_each` runs the tests' commands in one)."""
    return subprocess.run(
        [sys.executable, "-m", "lit_sparse", "lm-eval", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env={**os.environ, **OFFLINE},
    )


RUN_EACH = """
import json, os, sys, traceback
from lit_sparse.__main__ import main
try:  # each command's TaskManager indexes lm-eval's ~14,000 task files (8 s): once here
    from lm_eval.tasks._index import TaskIndex
    built, build = {}, TaskIndex.build
    def once(paths, **options):
        paths = list(paths)
        key = (tuple(map(str, paths)), tuple(sorted(options.items())))
        if key not in built:
            built[key] = build(paths, **options)
        return dict(built[key])
    TaskIndex.build = staticmethod(once)
except (ImportError, AttributeError):
    pass
for job in json.loads(sys.argv[1]):
    os.chdir(job["cwd"])
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    for fd, name in ((1, "stdout"), (2, "stderr")):
        os.dup2(os.open(job[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    try:
        code = main(["lm-eval", *job["args"]])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else int(done.code is not None)
    except Exception:  # as an uncaught exception ends a process: its traceback, status 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush(), sys.stderr.flush()
    for fd, copy in saved.items():
        os.dup2(copy, fd)
    with open(job["code"], "w") as out:
        out.write(str(code))
"""


def lm_eval_each(jobs: dict[str, tuple[list[str], os.PathLike]], folder) -> dict:
    """``python -m lit_sparse lm-eval ARGS`` in CWD for each ``name: (ARGS, CWD)``, all in one
    interpreter (``lit_sparse.__main__.main`` one after another, stdout and stderr in files of
    ``folder``): name -> a CompletedProcess like :func:`lm_eval`'s."""
    files = {
        name: {"args": args, "cwd": str(cwd)}
        | {kind: str(folder / f"{name}.{kind}") for kind in ("stdout", "stderr", "code")}
        for name, (args, cwd) in jobs.items()
    }
    runner = subprocess.run(
        [sys.executable, "-c", RUN_EACH, json.dumps(list(files.values()))],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **OFFLINE},
    )
    done = {}
    for name, job in files.items():
        read = {
            kind: open(job[kind]).read() if os.path.exists(job[kind]) else ""
            for kind in ("stdout", "stderr", "code")
        }
        code = int(read["code"]) if read["code"] else runner.returncode  # the runner died
        err = read["stderr"] + (runner.stderr if not read["code"] else "")
        done[name] = subprocess.CompletedProcess(job["args"], code, read["stdout"], err)
    return done


@pytest.fixture(scope="module")
def commands(random_export, learned_export, tmp_path_factory) -> dict:
    """The tests' commands, run once in one interpreter; each in its own folder (``cwd``)."""
    pytest.importorskip("lm_eval")
    folder = tmp_path_factory.mktemp("lm_eval_cli")
    cwd = {name: folder / name for name in ("rolling", "unknown", "hf", "agreement")}
    for path in cwd.values():
        path.mkdir()
    jobs = {
        "rolling": [
            "--model", "lit_sparse",
            "--model_args", f"pretrained={random_export},max_length=512",
            "--device", "cpu",  # lm-eval's own option (a device in model_args clashes with it)
            "--tasks", "lit_sparse_math_ppl",
            "--include_path", str(TASKS_DIR),
            "--limit", str(LIMIT),
            "--batch_size", "4",
            "--log_samples",
            "--output_path", str(cwd["rolling"] / "results"),
        ],
        "unknown": [
            "--model", "lit_sparse",
            "--model_args", f"pretrained={random_export}",
            "--tasks", "no_such_task",
            "--include_path", str(TASKS_DIR),
        ],
        "agreement": [  # the first held-out play, whole, in windows of the training length
            "--model", "lit_sparse",
            "--model_args", f"pretrained={learned_export},max_length={SEQ_LEN}",
            "--device", "cpu",
            "--tasks", "lit_sparse_shakespeare_ppl",
            "--include_path", str(TASKS_DIR),
            "--limit", "1",
            "--batch_size", "256",
            "--log_samples",
            "--output_path", str(cwd["agreement"] / "results"),
        ],
    }  # fmt: skip
    if "auto_map" in json.loads((random_export / "config.json").read_text()):
        jobs["hf"] = [
            "--model", "hf",
            "--model_args", f"pretrained={random_export},trust_remote_code=True",
            "--device", "cpu",
            "--tasks", "lit_sparse_math_ppl",
            "--include_path", str(TASKS_DIR),
            "--limit", str(LIMIT),
            "--output_path", str(cwd["hf"] / "hf"),
        ]  # fmt: skip
    done = lm_eval_each({name: (args, cwd[name]) for name, args in jobs.items()}, folder)
    return {name: (done.get(name), cwd[name]) for name in cwd}


@pytest.mark.slow  # starts lm-eval in a process
def test_a_shipped_rolling_task_runs_offline_and_scores_documents_as_score_does(
    random_export, commands
):
    done, cwd = commands["rolling"]
    out = cwd / "results"
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]["lit_sparse_math_ppl"]
    assert math.isfinite(results["word_perplexity,none"])
    (samples_file,) = out.rglob("samples_lit_sparse_math_ppl_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == LIMIT
    # each document fits one window of 512: its log-likelihood after the end-of-text token
    model, tokenizer = lit_sparse.load_pretrained(random_export)
    for sample in samples:
        ids = tokenizer.encode(sample["doc"]["text"])
        assert len(ids) < 512
        (expected,) = lit_sparse.score(model, [(tokenizer.document_prefix, ids)])
        got = sample["filtered_resps"][0]
        got = got[0] if isinstance(got, list) else got
        assert float(got) == pytest.approx(expected.logprob, rel=1e-4)


@pytest.mark.slow  # starts lm-eval in a process
def test_an_unknown_task_is_one_line(commands):
    done, _ = commands["unknown"]
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --tasks:") and "no_such_task" in last


@pytest.mark.slow  # starts lm-eval in a process
def test_lm_evals_hf_model_on_an_export(random_export, commands):
    """``--model hf`` needs the export to load in transformers (model_type, auto_map and the
    remote code: the transformers branch, issue 26)."""
    config = json.loads((random_export / "config.json").read_text())
    if "auto_map" not in config:
        pytest.skip("the export's config.json has no auto_map: it does not load in transformers")
    done, cwd = commands["hf"]
    out = cwd / "hf"
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]["lit_sparse_math_ppl"]
    assert math.isfinite(results["word_perplexity,none"])


@pytest.mark.slow  # starts lm-eval in a process
def test_lm_evals_documents_give_the_projects_own_token_perplexity(learned_run, commands):
    """The rolling task on the first held-out play through lm-eval (windows of the training
    length after the end-of-text token) and the project's own evaluation of the held-out
    stream (``evaluate_lengths``, as ``validate`` and ``extrapolate`` score it) over the
    windows that play fills score the same tokens in the same windows; only the play's last
    partial window differs (lm-eval reads it with a full window of context, the stream's
    windows stop before it). Their token perplexities agree within 0.5 %."""
    done, cwd = commands["agreement"]
    assert done.returncode == 0, done.stderr[-3000:]
    (samples_file,) = (cwd / "results").rglob("samples_lit_sparse_shakespeare_ppl_*.jsonl")
    (sample,) = [json.loads(line) for line in samples_file.read_text().splitlines()]
    got = sample["filtered_resps"][0]
    tokens = len(lit_sparse.Tokenizer.from_pretrained().encode(sample["doc"]["text"]))
    lm_evals = math.exp(-float(got[0] if isinstance(got, list) else got) / tokens)

    windows = tokens // SEQ_LEN  # the stream's windows within the play (no EOS predicted)
    datamodule = tiny_datamodule(val_windows=windows)
    datamodule.setup("validate")
    ours = evaluate_lengths(learned_run.module, datamodule, [SEQ_LEN], sets=["shakespeare"])
    assert ours.tokens["shakespeare"][SEQ_LEN] == windows * SEQ_LEN > tokens - SEQ_LEN
    assert ours.ppl("shakespeare", SEQ_LEN) == pytest.approx(lm_evals, rel=5e-3)

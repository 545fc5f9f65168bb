"""The training bench's shapes (lit_sparse_studies/bench/train.py): the recall study's shapes
are its configs, and their step trains at the asked positions. The command:
tests/studies/commands/test_bench.py."""

from __future__ import annotations

from lit_sparse_studies.bench.plan import bench_rows, length_spec
from lit_sparse_studies.bench.train import TRAIN_SHAPES
from lit_sparse_studies.commands.bench import parse_bench


def test_the_recall_study_shapes_are_its_configs_and_train_at_the_asked_positions():
    """``--shape mqar128|distance|far_mqar``: the study's model, T and batch (from its task
    config), one step of the study's loss; ``--compile`` adds a compiled row per plugin."""
    import torch
    import yaml

    from lit_sparse_studies.bench.train import COMPILED, train_case

    for name in ("mqar128", "distance", "far_mqar"):
        config = yaml.safe_load(open(f"configs/study/recall/{name}.yaml"))
        shape, arch, data = TRAIN_SHAPES[name], config["model"]["arch"], config["data"]
        assert (shape["d_model"], shape["ffn_hidden"], shape["vocab_size"]) == (
            arch["d_model"], arch["ffn_hidden"], data["init_args"]["vocab_size"]
        )  # fmt: skip
        assert shape["n_layers"] == arch["n_layers"]
        assert (shape["length"], shape["batch"]) == (
            data["init_args"]["seq_len"], data["init_args"]["batch_size"]
        )  # fmt: skip
        assert shape["task"].get("gap", 0) == data["init_args"].get("gap", 0)
    args = parse_bench(["train", "--shape", "mqar128", "--compile"])
    args.plugins, args.lengths = ["fibonacci"], None
    assert bench_rows(args) == ["dense", "dense" + COMPILED, "fibonacci", "fibonacci" + COMPILED]
    assert length_spec(args, 128)["batch"] == 256
    spec = {**length_spec(args, 128), "plugin": "fibonacci", "batch": 4}
    case, _ = train_case(spec)
    step = case(128)
    torch.manual_seed(0)
    step()  # one AdamW step of the loss at the 8 queries of each example
    far = parse_bench(["train", "--shape", "far_mqar"])
    far.plugins, far.lengths = ["fibonacci"], None
    spec = {**length_spec(far, 256), "plugin": "fibonacci"}
    train_case(spec)[0](64)  # the memory row's warm-up: a batch at 64, where G = 96 has no room

"""Writes exports.pt: the logits and the greedy continuation of a fixed prompt for each
Fibonacci export of the recall study (docs/recall-study/weights; config.json in the flat
schedule form), as the code before the schedule types computed them. It was run once, at
commit c05557a, from the repository root:

    python tests/attention/legacy_schedules/export_outputs.py
"""

from pathlib import Path

import torch

from lit_sparse import LanguageModel
from lit_sparse.generation.generate import generate

HERE = Path(__file__).parent
WEIGHTS = Path("docs/recall-study/weights")
PROMPT = torch.tensor([[3, 40, 41, 7, 90, 12, 200, 201, 5, 40, 8, 90, 33, 12, 4, 200]])


def main() -> None:
    outputs = {}
    for folder in sorted([*WEIGHTS.glob("mqar64-fib_*"), *WEIGHTS.glob("mqar64-pow2_*")]):
        model = LanguageModel.from_pretrained(folder).eval()
        with torch.no_grad():
            logits = model(PROMPT)
        greedy = torch.cat(list(generate(model, PROMPT, 12, temperature=0))).tolist()
        outputs[folder.name] = {"logits": logits, "greedy": greedy}
    torch.save({"prompt": PROMPT, "outputs": outputs}, HERE / "exports.pt")


if __name__ == "__main__":
    main()

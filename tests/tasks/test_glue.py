"""The GLUE recipe end to end on the fixture task directories and a tiny Google checkpoint."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert import artifacts
from kbert.checkpoints import GoogleCheckpoint
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.tasks import epoch_callbacks
from kbert.tasks import fine_tuning
from kbert.tasks import glue
from kbert.tokenization import vocab as vocab_lib

# What the recipe reads, writes and resumes; the traced step has its own tests (tests/eager.py).
pytestmark = pytest.mark.usefixtures("eager_functions")

GLUE_DIR = os.path.join(os.path.dirname(__file__), "..", "fixtures", "glue")


def config(task, directory, output_dir, **kwargs):
    defaults = dict(max_seq_length=16, train_batch_size=4, eval_batch_size=3,
                    predict_batch_size=2, learning_rate=1e-3, num_train_epochs=1)
    return glue.GlueConfig(task_name=task, data_dir=os.path.join(GLUE_DIR, directory),
                           output_dir=str(output_dir), **{**defaults, **kwargs})


class Interrupt(keras.callbacks.Callback):
    """Stops the first fit after its first epoch, as a killed job would."""

    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


def test_train_resume_evaluate_predict(tiny_google_dir, tmp_path, monkeypatch):
    out = tmp_path / "mrpc"
    run = config("MRPC", "MRPC", out, init_checkpoint=tiny_google_dir, num_train_epochs=2,
                 do_train=True, do_eval=True, do_predict=True, keep_best_epoch=False)
    # Interrupted after epoch 1 (the backup is written before the interrupting callback) ...
    monkeypatch.setattr(keras.callbacks, "TensorBoard", lambda *a, **k: Interrupt())
    with pytest.raises(KeyboardInterrupt):
        glue.run_glue(run)
    assert os.path.isdir(out / "backup")
    monkeypatch.undo()
    # ... the same run again resumes at epoch 2 and finishes.
    results = glue.run_glue(run)
    train = results["train"]
    assert train["epochs_this_run"] == 1 and train["examples"] == 8
    assert train["steps"] == 2 * 2  # 8 examples, batch 4
    assert not os.path.exists(out / "backup") and os.path.isdir(out / "logs")
    assert sorted(results["eval"]) == ["dev"]
    dev = results["eval"]["dev"]
    assert set(dev) == {"accuracy", "f1", "accuracy_and_f1", "loss", "examples"}
    assert dev["examples"] == 5 and 0 <= dev["accuracy"] <= 1
    lines = (out / "eval_results.txt").read_text().splitlines()
    assert f"dev_accuracy = {dev['accuracy']}" in lines and "global_step = 4" in lines
    assert json.loads((out / "eval_results.json").read_text())["dev"]["f1"] == dev["f1"]
    rows = (out / "MRPC.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction" and len(rows) == 5
    assert [r.split("\t")[0] for r in rows[1:]] == ["0", "1", "2", "3"]
    assert {r.split("\t")[1] for r in rows[1:]} <= {"0", "1"}
    assert (out / "vocab.txt").exists()
    # Google's run_classifier.py layout beside model.keras (issue 20).
    assert_google_checkpoint(out, {"output_weights": (2, 12), "output_bias": (2,)},
                             lambda path: BertClassifier.from_google_checkpoint(path, 2))
    # Evaluating again later reads output_dir/model.keras (and its vocab.txt), as Google's
    # Estimator reads its output_dir.
    again = glue.run_glue(config("MRPC", "MRPC", out, do_eval=True))
    assert again["eval"]["dev"]["accuracy"] == pytest.approx(dev["accuracy"])
    assert again["eval"]["dev"]["loss"] == pytest.approx(dev["loss"], rel=1e-5)


class InterruptSecond(keras.callbacks.Callback):
    """Stops the first fit after its second epoch."""

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            raise KeyboardInterrupt


def test_a_backup_torn_by_a_kill_resumes_from_the_one_before(tiny_google_dir, tmp_path,
                                                              monkeypatch):
    out = tmp_path / "mrpc"
    run = config("MRPC", "MRPC", out, init_checkpoint=tiny_google_dir, num_train_epochs=3,
                 do_train=True)
    monkeypatch.setattr(keras.callbacks, "TensorBoard", lambda *a, **k: InterruptSecond())
    with pytest.raises(KeyboardInterrupt):
        glue.run_glue(run)
    monkeypatch.undo()
    # Epoch 2's backup torn (backups are renamed into place when complete: by a disk fault).
    latest = out / "backup" / "epoch-000002" / "model.weights.h5"
    latest.write_bytes(latest.read_bytes()[:1000])
    train = glue.run_glue(run)["train"]
    assert train["epochs_this_run"] == 2  # epoch 1's backup, then epochs 2 and 3
    assert train["steps"] == 3 * 2


def test_regression_and_two_dev_sets_without_training(tiny_google_dir, tmp_path):
    stsb = glue.run_glue(config("STS-B", "STS-B", tmp_path / "stsb", do_eval=True,
                                do_predict=True, init_checkpoint=tiny_google_dir,
                                allow_untrained_head=True))
    assert set(stsb["eval"]["dev"]) == {"pearson", "spearman", "correlation", "loss", "examples"}
    rows = (tmp_path / "stsb" / "STS-B.tsv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].split("\t")[1].replace("-", "").replace(".", "").isdigit()
    assert len(rows[1].split("\t")[1].split(".")[1]) == 3
    mnli = glue.run_glue(config("MNLI", "MNLI", tmp_path / "mnli", do_eval=True,
                                do_predict=True, init_checkpoint=tiny_google_dir,
                                allow_untrained_head=True))
    assert sorted(mnli["eval"]) == ["dev_matched", "dev_mismatched"]
    assert sorted(mnli["predict"]) == ["MNLI-m", "MNLI-mm"]
    text = (tmp_path / "mnli" / "eval_results.txt").read_text()
    assert "dev_matched_accuracy = " in text and "dev_mismatched_accuracy = " in text
    prediction = (tmp_path / "mnli" / "MNLI-m.tsv").read_text().splitlines()[1].split("\t")[1]
    assert prediction in ("contradiction", "entailment", "neutral")


def test_ax_is_predicted_with_an_mnli_model(tiny_google_dir, tmp_path):
    model = BertClassifier(BertEncoder.from_google_checkpoint(tiny_google_dir), 3)
    model.save(str(tmp_path / "model.keras"))
    shutil.copy(os.path.join(tiny_google_dir, "vocab.txt"), tmp_path / "vocab.txt")
    results = glue.run_glue(config("AX", "diagnostic", tmp_path / "ax", do_predict=True,
                                   init_checkpoint=str(tmp_path / "model.keras")))
    with open(results["predict"]["AX"]) as f:
        rows = f.read().splitlines()
    assert rows[0] == "index\tprediction" and [r.split("\t")[0] for r in rows[1:]] == ["0", "1"]
    with pytest.raises(ValueError, match="AX can only be predicted"):
        config("AX", "diagnostic", tmp_path, do_train=True)
    two = BertClassifier(BertEncoder.from_google_checkpoint(tiny_google_dir), 2)
    two.save(str(tmp_path / "two.keras"))
    with pytest.raises(ValueError, match="expected a BertClassifier with 3 outputs"):
        glue.run_glue(config("AX", "diagnostic", tmp_path / "ax", do_predict=True,
                             init_checkpoint=str(tmp_path / "two.keras")))


def test_config_validation(tmp_path):
    with pytest.raises(ValueError, match="At least one of do_train"):
        config("MRPC", "MRPC", tmp_path)
    with pytest.raises(ValueError, match="must be a whole number"):
        config("MRPC", "MRPC", tmp_path, do_train=True, num_train_epochs=1.5)
    with pytest.raises(ValueError, match="Unknown GLUE task 'XNLI'"):
        config("XNLI", "MRPC", tmp_path, do_train=True)
    with pytest.raises(ValueError, match="init_checkpoint is required"):
        glue.run_glue(config("MRPC", "MRPC", tmp_path, do_train=True))


def test_format_predictions():
    spec = glue.glue.get_task("RTE")
    assert glue.format_predictions(spec, np.array([[0.1, 0.9], [2.0, -1.0]])) == [
        "not_entailment", "entailment"]
    assert glue.format_predictions(glue.glue.get_task("STS-B"), np.array([[4.12345], [0.5]])) == [
        "4.123", "0.500"]


def test_prediction_files_keep_one_line_and_their_columns_per_example(tmp_path):
    # A CSV field may hold tabs and line breaks; in a TSV they would shift the columns or
    # start a line. Each becomes a space.
    texts = ("a\tb", "two\r\nlines", "sep\u2028arated\x85x")
    examples = glue.glue.Examples(text_a=texts, text_b=("x", "y\nz", "w"),
                                  label=np.array([0, 1, 0]), index=("i\t1", "i2", "i3\r"),
                                  label_names=("no", "yes"), source="own.csv")
    outputs = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.2]])
    table, plain = tmp_path / "dev_predictions.tsv", tmp_path / "test_predictions.tsv"
    glue.write_prediction_table(str(table), examples, ["no", "yes", "no"], ["no", "yes", "no"],
                                ("no", "yes"), outputs)
    glue.write_predictions(str(plain), examples.index, ["no", "yes", "no"])
    rows = [line.split("\t") for line in table.read_text(encoding="utf-8").splitlines()]
    assert [len(row) for row in rows] == [7] * 4
    assert [row[:3] for row in rows[1:]] == [["i 1", "a b", "x"], ["i2", "two  lines", "y z"],
                                             ["i3 ", "sep arated x", "w"]]
    assert plain.read_text(encoding="utf-8").splitlines() == [
        "index\tprediction", "i 1\tno", "i2\tyes", "i3 \tno"]


def scripted_dev_scores(monkeypatch, values):
    """Makes the per-epoch dev score follow `values`; records each epoch's weights."""
    snapshots = []
    original = epoch_callbacks.DevScores.on_epoch_end

    def on_epoch_end(self, epoch, logs=None):
        original(self, epoch, logs)
        logs[f"dev_{self.metric}"] = values[epoch]
        snapshots.append([w.copy() for w in self.model.get_weights()])

    monkeypatch.setattr(epoch_callbacks.DevScores, "on_epoch_end", on_epoch_end)
    return snapshots


def assert_kept_epoch(out, snapshots, epoch, model_type):
    lines = (out / "eval_results.txt").read_text().splitlines()
    assert f"kept_epoch = {epoch}" in lines and f"best_epoch = {epoch}" in lines
    assert "kept = best" in lines
    kept = keras.saving.load_model(str(out / "model.keras"))
    assert isinstance(kept, model_type)
    for saved, expected in zip(kept.get_weights(), snapshots[epoch - 1], strict=True):
        np.testing.assert_allclose(saved, expected, atol=1e-7)


def test_the_best_epoch_is_kept(tiny_google_dir, tmp_path, monkeypatch):
    snapshots = scripted_dev_scores(monkeypatch, [0.2, 0.8, 0.1])  # drops in the last epoch
    out = tmp_path / "mrpc"
    results = glue.run_glue(config("MRPC", "MRPC", out, init_checkpoint=tiny_google_dir,
                                   num_train_epochs=3, do_train=True, do_eval=True))
    assert results["train"]["best_epoch"] == 2 and results["train"]["kept"] == "best"
    assert_kept_epoch(out, snapshots, 2, BertClassifier)


def assert_google_checkpoint(out, head_shapes, load):
    """`out/bert_model.ckpt` holds exactly the encoder of `out/model.keras` plus the head
    tensors `head_shapes` (Google name -> shape), and `load(out)` (a `from_google_checkpoint`)
    rebuilds the model bit-identically."""
    saved = keras.saving.load_model(str(out / "model.keras"))
    shapes = dict(tf.train.list_variables(str(out / "bert_model.ckpt")))
    assert {name: shapes[name] for name in shapes if not name.startswith("bert/")} == {
        name: list(shape) for name, shape in head_shapes.items()}
    layers = saved.bert_config.num_hidden_layers
    assert sum(name.startswith("bert/encoder/layer_") for name in shapes) == 16 * layers
    assert tf.train.latest_checkpoint(str(out)).endswith("bert_model.ckpt")
    assert not any("adam" in name or name == "global_step" for name in shapes)
    reloaded = load(str(out))
    assert type(reloaded) is type(saved)
    for a, b in zip(saved.weights, reloaded.weights, strict=True):
        assert a.path == b.path
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def _one_step_run(tmp_path, tiny_google_dir, name, **kwargs):
    """The recipe's training on the 8 MRPC fixture examples with dropout 0; returns (stats,
    weights)."""
    from kbert.tokenization import BertPreprocessor

    run = config("MRPC", "MRPC", tmp_path / name, init_checkpoint=tiny_google_dir,
                 do_train=True, seed=3, **kwargs)
    spec = glue.task_spec(run)
    keras.utils.set_random_seed(run.seed)
    pretrained = BertClassifier.from_google_checkpoint(tiny_google_dir, 2)
    model = BertClassifier(BertEncoder.from_config(
        {**pretrained.encoder.get_config(), "dropout": 0.0, "attention_dropout": 0.0}), 2,
        dropout=0.0)
    model.set_weights(pretrained.get_weights())
    preprocessor = BertPreprocessor(os.path.join(tiny_google_dir, "vocab.txt"),
                                    max_seq_length=16, pad_to_max_length=False)
    recipe = glue.ClassifierRecipe(run)
    recipe.spec, recipe.preprocessor = spec, preprocessor
    training = recipe.training(model, {"train": glue.read_split(run, spec, "train")})
    trained = training.model or model
    stats = fine_tuning.fit_and_record(trained, training.dataset, training.steps_per_epoch, run,
                                       stats=training.stats,
                                       compile_kwargs=training.compile_kwargs)
    model.set_weights(trained.get_weights())
    return stats, [w.copy() for w in model.get_weights()]


def test_packed_training_takes_the_unpacked_step(tiny_google_dir, tmp_path):
    """One step over all 8 examples: packed rows (each example seeing only itself, empty slots
    ignored) give the unpacked loss; the unpacked model gets the packed twin's weights."""
    plain, plain_weights = _one_step_run(tmp_path, tiny_google_dir, "plain", train_batch_size=8)
    packed, packed_weights = _one_step_run(tmp_path, tiny_google_dir, "packed",
                                           train_batch_size=8, pack_examples=True)
    assert packed["packed"] and packed["steps"] == plain["steps"] == 1
    np.testing.assert_allclose(packed["final_loss"], plain["final_loss"], rtol=1e-5)
    # Equal gradients, so the same AdamW step (the step of a tiny gradient, ~1e-7, is the
    # one most sensitive to rounding: lr * g / (|g| + epsilon) after bias correction).
    for a, b in zip(packed_weights, plain_weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_pack_examples_validation(tmp_path):
    with pytest.raises(ValueError, match="not regression"):
        config("STS-B", "STS-B", tmp_path, do_train=True, pack_examples=True)
    with pytest.raises(ValueError, match="one device"):
        config("MRPC", "MRPC", tmp_path, do_train=True, pack_examples=True,
               distribution_strategy="mirrored")


@pytest.mark.traced  # the steps in one traced loop
def test_steps_per_execution_gives_the_same_run(tiny_google_dir, tmp_path):
    """4 steps in one graph call or one by one: the same batches, the same weights."""
    one, one_weights = _one_step_run(tmp_path, tiny_google_dir, "one", train_batch_size=2)
    four, four_weights = _one_step_run(tmp_path, tiny_google_dir, "four", train_batch_size=2,
                                       steps_per_execution=4)
    assert one["steps"] == four["steps"] == 4
    assert four["final_loss"] == pytest.approx(one["final_loss"], rel=1e-6)
    for a, b in zip(one_weights, four_weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_a_run_starts_from_a_hugging_face_directory(tiny_google_dir, tmp_path):
    hf_dir = tmp_path / "hf"
    kbert.convert_google_to_huggingface(tiny_google_dir, str(hf_dir))
    out = tmp_path / "out"
    # A rate too small to move the weights: the model must start from the HF directory's.
    results = glue.run_glue(config("MRPC", "MRPC", out, init_checkpoint=str(hf_dir),
                                   do_train=True, do_eval=True, learning_rate=1e-12))
    assert results["train"]["examples"] == 8 and results["eval"]["dev"]["examples"] == 5
    manifest = json.loads((out / artifacts.MANIFEST_FILE).read_text())
    assert manifest["init_checkpoint"]["path"] == str(hf_dir / "model.safetensors")
    assert manifest["vocab_file"]["path"] == str(hf_dir / "vocab.txt")
    assert (out / "vocab.txt").read_text() == (hf_dir / "vocab.txt").read_text()
    release = kbert.BertEncoder.from_google_checkpoint(tiny_google_dir)
    trained = keras.saving.load_model(str(out / "model.keras")).encoder
    for a, b in zip(release.weights, trained.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)


@pytest.mark.parametrize("start", ["release", "trained_google_checkpoint"])
def test_a_run_opens_its_checkpoint_once_and_reads_its_vocab_once(tiny_google_dir, tmp_path,
                                                                   monkeypatch, start):
    init = tiny_google_dir
    steps = dict(do_train=True, do_eval=True)
    if start == "trained_google_checkpoint":  # evaluating it checks its head first
        glue.run_glue(config("MRPC", "MRPC", tmp_path / "trained", init_checkpoint=init,
                             do_train=True))
        init = tmp_path / "google"
        init.mkdir()
        for name in os.listdir(tmp_path / "trained"):
            if name.startswith(("bert_model.ckpt", "bert_config", "vocab")):
                shutil.copy(tmp_path / "trained" / name, init)
        init, steps = str(init), dict(do_eval=True)
    opened, read = [], []
    original_open, original_load_vocab = GoogleCheckpoint.open.__func__, vocab_lib.load_vocab

    def counting_open(cls, path, config=None):
        opened.append(path)
        return original_open(cls, path, config)

    def counting_load_vocab(path):
        read.append(path)
        return original_load_vocab(path)

    monkeypatch.setattr(GoogleCheckpoint, "open", classmethod(counting_open))
    monkeypatch.setattr(vocab_lib, "load_vocab", counting_load_vocab)
    results = glue.run_glue(config("MRPC", "MRPC", tmp_path / "out", init_checkpoint=init,
                                   **steps))
    assert results["eval"]["dev"]["examples"] == 5
    assert opened == [init]
    assert read == [os.path.join(init, "vocab.txt")]

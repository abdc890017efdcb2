"""The recipe skeleton: casing guard, run manifest, best epoch, output model without optimizer."""

import json
import zipfile

import keras
import numpy as np
import pytest

from kbert import artifacts
from kbert.models import opening
from kbert.tasks import casing
from kbert.tasks import configs
from kbert.tasks import epoch_callbacks
from kbert.tasks import fine_tuning
from kbert.tasks import run_manifest

UPPER_WORDS = ["The", "Paris", "London", "said"]
LOWER_WORDS = [f"word{chr(97 + i % 26)}{i}" for i in range(120)]


def vocab(tmp_path, words, name="vocab.txt"):
    path = tmp_path / name
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    path.write_text("".join(t + "\n" for t in special + words))
    return str(path)


def test_casing_guard_by_release_name(tmp_path):
    uncased = vocab(tmp_path, LOWER_WORDS)
    release = str(tmp_path / "cased_L-12_H-768_A-12")
    with pytest.raises(ValueError, match=r"cased release is cased, but do_lower_case=True; "
                                         r"pass --do_lower_case=false"):
        casing.check_casing(True, uncased, release)
    casing.check_casing(False, uncased, release)  # the name wins over the vocab
    with pytest.raises(ValueError, match="uncased release is uncased.*--do_lower_case=true"):
        casing.check_casing(False, uncased, str(tmp_path / "uncased_L-2_H-128_A-2"))
    casing.check_casing(True, uncased, str(tmp_path / "multilingual_L-12_H-768_A-12"))


def test_casing_guard_by_vocab(tmp_path):
    cased = vocab(tmp_path, LOWER_WORDS + UPPER_WORDS, "cased.txt")
    uncased = vocab(tmp_path, LOWER_WORDS, "uncased.txt")
    with pytest.raises(ValueError, match=r"3 word pieces have upper-case letters \(e.g. 'The'\)"
                                         r".*pass --do_lower_case=false.*allow_casing_mismatch"):
        casing.check_casing(True, cased, str(tmp_path / "my_model"))
    with pytest.raises(ValueError, match="no word piece has an upper-case letter.*"
                                         "--do_lower_case=true"):
        casing.check_casing(False, uncased, None)
    casing.check_casing(False, cased, None)
    casing.check_casing(True, uncased, None)
    # Too few letters to tell ([unusedN] and the like do not count): no error either way.
    small = vocab(tmp_path, ["[unused0]", "the", "a"], "small.txt")
    casing.check_casing(False, small, None)


def test_casing_override(tiny_google_dir, tmp_path):
    cased = vocab(tmp_path, LOWER_WORDS[:22] + UPPER_WORDS, "cased.txt")  # 31, as the model
    source = opening.open_model(tiny_google_dir, vocab_file=cased)
    config = configs.FineTuningConfig(output_dir=str(tmp_path / "out"), do_eval=True,
                                          max_seq_length=16)
    with pytest.raises(ValueError, match="upper-case letters"):
        fine_tuning.validate_inputs(config, source)
    allowed = configs.FineTuningConfig(output_dir=str(tmp_path / "out"), do_eval=True,
                                           max_seq_length=16, allow_casing_mismatch=True)
    fine_tuning.validate_inputs(allowed, source)


def test_validate_inputs(tiny_google_dir, tmp_path):
    source = opening.open_model(tiny_google_dir)
    config = configs.FineTuningConfig(output_dir=str(tmp_path), do_eval=True,
                                          max_seq_length=16)
    with pytest.raises(FileNotFoundError, match="dev.tsv: not found \\(dev_file\\)"):
        fine_tuning.validate_inputs(config, source, [("dev_file", str(tmp_path / "dev.tsv"))])
    long = configs.FineTuningConfig(output_dir=str(tmp_path), do_eval=True,
                                        max_seq_length=17)
    with pytest.raises(ValueError, match="max_seq_length=17 is longer than the model's "
                                         "max_position_embeddings=16"):
        fine_tuning.validate_inputs(long, source)
    big = vocab(tmp_path, [f"w{i}" for i in range(40)], "big.txt")
    with pytest.raises(ValueError, match=r"big.txt: 45 tokens, but the model \(.*\) has "
                                         r"vocab_size=31 embedding rows"):
        fine_tuning.validate_inputs(config, opening.open_model(tiny_google_dir, big))


def test_manifest_resumes_only_the_same_run(tiny_google_dir, tmp_path):
    def config(**kwargs):
        return configs.FineTuningConfig(output_dir=str(tmp_path), do_train=True,
                                            init_checkpoint=tiny_google_dir, **kwargs)

    source = opening.open_model(tiny_google_dir)
    first = run_manifest.manifest_for(config(), source)
    run_manifest.begin_training(config(), first)
    run_manifest.begin_training(config(do_eval=True), first)  # same run: resumes
    (tmp_path / "backup").mkdir()  # its progress: another run may not take it over
    other = run_manifest.manifest_for(config(learning_rate=1e-3), source)
    with pytest.raises(ValueError, match=r"holds another run \(settings.learning_rate: was "
                                         r"5e-05, now 0.001\); pass --overwrite_output_dir.*"
                                         r"or choose another --output_dir"):
        run_manifest.begin_training(config(learning_rate=1e-3), other)
    run_manifest.finish_training(config())
    with pytest.raises(ValueError, match="holds a finished run"):
        run_manifest.begin_training(config(), first)
    (tmp_path / "model.keras").write_text("old")
    run_manifest.begin_training(config(learning_rate=1e-3, overwrite_output_dir=True), other)
    assert not (tmp_path / "model.keras").exists()
    manifest = json.loads((tmp_path / artifacts.MANIFEST_FILE).read_text())
    assert manifest["settings"]["learning_rate"] == 1e-3 and manifest["finished"] is False


def test_best_epoch_is_kept(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    snapshots = []
    scripted = iter([0.5, 0.9, 0.2])  # the dev score drops in the last epoch

    def score(m):
        snapshots.append([w.copy() for w in m.get_weights()])
        return {"f1": next(scripted)}, len(snapshots)

    class Config:
        output_dir, num_train_epochs, learning_rate = str(tmp_path), 3, 0.1
        warmup_proportion, jit_compile, keep_best_epoch = 0.0, False, True
        train_batch_size, log_every_n_steps = 4, 0

        @staticmethod
        def compile_settings():
            return dict(learning_rate=0.1, warmup_proportion=0.0)

    model.compile(loss="mse")  # replaced by compile_model, which needs a loss
    model.compute_loss = lambda x, y, y_pred, sample_weight=None, training=True: keras.ops.mean(
        (y - y_pred) ** 2)
    dataset = __import__("tensorflow").data.Dataset.from_tensor_slices(
        (np.ones((8, 2), "float32"), np.ones((8, 1), "float32"))).batch(4)
    dev = epoch_callbacks.DevScores(score, "f1")
    stats = fine_tuning.fit_and_record(model, dataset, 2, Config, dev_scores=dev)
    assert (stats["best_epoch"], stats["kept_epoch"], stats["kept"]) == (2, 2, "best")
    for kept, expected in zip(model.get_weights(), snapshots[1], strict=True):
        np.testing.assert_array_equal(kept, expected)
    assert dev.outputs_of(2) is None and dev.outputs_of(3) == 3  # epoch 2 must be re-scored
    log = (tmp_path / "training_log.csv").read_text().splitlines()
    assert log[0] == "epoch,dev_f1,loss" and len(log) == 4
    assert (tmp_path / "backup").exists()  # until run_manifest.finish_training
    fine_tuning.save_model(model, str(tmp_path / "model.keras"))
    names = zipfile.ZipFile(tmp_path / "model.keras").namelist()
    with zipfile.ZipFile(tmp_path / "model.keras") as archive, archive.open(
            "model.weights.h5") as f:
        weights = f.read()
    assert "model.weights.h5" in names and b"optimizer" not in weights

"""The skeleton every fine-tuning recipe shares: config, start point, checks, fit and record.

A recipe (`kbert.tasks.glue`, `ner`, `squad`) is a reader, a head and a metric; the rest is here:

    FineTuningConfig   the settings every run has (checkpoint, vocab, casing, lengths, batch
                       sizes, schedule, seed, strategy, precision, output dir).
    resolve_init       `init_checkpoint` -> what to load and the vocab that goes with it.
    validate_inputs    files exist and parse, lengths fit the model, casing matches the vocab
                       (`kbert.tasks.casing`), the output dir is writable: before any training.
    (`kbert.tasks.run_manifest` resumes only the same run and never silently overwrites.)
    fit_and_record     compile, fit (resumable), the end-of-epoch callbacks of
                       `kbert.tasks.epoch_callbacks` (dev scores, best epoch, CSV and
                       TensorBoard logs), write train_results.json.
    write_outputs      the output layout every recipe shares:

        model.keras              weights and config only (no optimizer state)
        bert_model.ckpt.*, checkpoint   the same weights, head included, in Google's format
        vocab.txt (+ added_tokens.txt), bert_config.json
        export_settings.json     what `tools/export_saved_model.py --model=OUTPUT_DIR` needs
        eval_results.txt/.json   `write_eval_results`; predictions beside them
        training_log.csv, logs/  per-epoch scores (CSV and TensorBoard)
        train_results.json, run_manifest.json; backup/ until the outputs are written
"""

import dataclasses
import os
import time
import typing

import keras
from absl import logging

from kbert import artifacts
from kbert import io
from kbert import ranges
from kbert.checkpoints import tf1
from kbert.config import BertConfig
from kbert.tasks import backups
from kbert.tasks import casing
from kbert.tasks import distribution
from kbert.tasks import epoch_callbacks
from kbert.tasks import optimization
from kbert.tokenization import vocab as vocab_lib

MODEL_FILE = "model.keras"
BACKUP_DIR = "backup"
TRAIN_RESULTS_FILE = "train_results.json"
EVAL_RESULTS_FILE = "eval_results"  # .txt and .json
MANIFEST_FILE = artifacts.MANIFEST_FILE  # see kbert.tasks.run_manifest
EXPORT_SETTINGS_FILE = "export_settings.json"
EMBEDDING_UPDATES = ("dense", "sparse")  # see FineTuningConfig.embedding_updates


@dataclasses.dataclass(frozen=True, kw_only=True)
class FineTuningConfig:
    """What every fine-tuning run has; a recipe's config adds its data and head fields.

    Args:
        output_dir: str. Where the model, results, logs and the training backup go.
        init_checkpoint: str. A Google checkpoint (release directory, training directory or
            prefix) or a recipe's `.keras` model. Defaults to `output_dir/model.keras` when
            only evaluating or predicting.
        vocab_file: str. Defaults to the `vocab.txt` beside the checkpoint.
        bert_config_file: str. Defaults to the `bert_config.json` beside the checkpoint.
        do_lower_case: bool. Whether the model is uncased; checked against the checkpoint's
            release name and its vocab (see `check_casing`). Defaults to True.
        allow_casing_mismatch: bool. Skip that check. Defaults to False.
        max_seq_length: int. Word pieces per input. Defaults to 128.
        train_batch_size, eval_batch_size, predict_batch_size: int. Global batch sizes.
            Defaults 32, 8, 8.
        learning_rate: float. Peak AdamW learning rate. Defaults to 5e-5.
        num_train_epochs: int. Whole epochs (Keras `fit` counts whole epochs). Defaults 3.
        warmup_proportion: float. Fraction of training steps of linear warm-up. Defaults 0.1.
        do_train, do_eval, do_predict: bool. Which steps to run.
        keep_best_epoch: bool. With a dev set, the saved model is the epoch with the best dev
            metric (else the last epoch). Defaults to True.
        overwrite_output_dir: bool. Start over in an output dir that holds another or a
            finished run. Defaults to False.
        allow_untrained_head: bool. Evaluate or predict without training from a Google
            checkpoint that has no head of this task (its head is random). Defaults to False.
        seed: int. Seeds the subset, the shuffle, dropout and the new head. Defaults 12345.
        distribution_strategy: str or `tf.distribute.Strategy`. One of
            `kbert.tasks.distribution.STRATEGIES`. Defaults to "one_device".
        tpu: str. The TPU for distribution_strategy "tpu". Defaults to None.
        mixed_precision: str. "float32", "mixed_float16" or "mixed_bfloat16".
        jit_compile: bool. XLA-compile the train step. Batches are padded to their longest
            example, so they come in many shapes and XLA compiles each new one, seconds each:
            on a short fine-tuning run that costs more than it saves. Defaults to False.
        embedding_updates: str. "dense" (exact AdamW over the whole word table) or "sparse"
            (only the rows a batch used; `AdamW(sparse_embedding_updates=True)`). Defaults to
            "dense".
        head_learning_rate_multiplier: float. The task head's variables learn at
            learning_rate × this (e.g. a CRF's transitions). Defaults to 1.
        layerwise_lr_decay: float in (0, 1] or None. ELECTRA's layer-wise decay: lower layers
            learn slower (`kbert.tasks.optimization.layer_multipliers`). Defaults to None.
        steps_per_execution: int. Train steps per `tf.function` call (Keras `compile`);
            callbacks then see every that many steps. Defaults to 1.
    """

    output_dir: str
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    bert_config_file: str | None = None
    do_lower_case: bool = True
    allow_casing_mismatch: bool = False
    max_seq_length: int = ranges.field(128, ranges.at_least(3))  # [CLS] a piece [SEP]
    train_batch_size: int = ranges.field(32, ranges.at_least(1))
    eval_batch_size: int = ranges.field(8, ranges.at_least(1))
    predict_batch_size: int = ranges.field(8, ranges.at_least(1))
    learning_rate: float = ranges.field(5e-5, ranges.above(0))
    num_train_epochs: int = ranges.field(3, ranges.above(0))
    warmup_proportion: float = ranges.field(0.1, ranges.between(0, 1))
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    keep_best_epoch: bool = True
    overwrite_output_dir: bool = False
    allow_untrained_head: bool = False
    seed: int = ranges.field(12345, ranges.SEED)
    distribution_strategy: object = "one_device"
    tpu: str | None = None
    mixed_precision: str = "float32"
    jit_compile: bool = False
    embedding_updates: str = "dense"
    head_learning_rate_multiplier: float = ranges.field(1.0, ranges.above(0))
    layerwise_lr_decay: float | None = ranges.field(None, ranges.between(0, 1, low_open=True))
    steps_per_execution: int = ranges.field(1, ranges.at_least(1))

    # Keras `fit` counts whole epochs; a recipe that cuts its own steps may take fractions.
    whole_epochs: typing.ClassVar[bool] = True

    def __post_init__(self):
        ranges.check(self)
        distribution.check(self.distribution_strategy, self.mixed_precision)
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("At least one of do_train, do_eval or do_predict must be set")
        if self.whole_epochs and self.num_train_epochs != int(self.num_train_epochs):
            raise ValueError(f"num_train_epochs must be a whole number (Keras fit counts "
                             f"epochs), got {self.num_train_epochs}")
        if self.embedding_updates not in EMBEDDING_UPDATES:
            raise ValueError(f"embedding_updates must be one of {EMBEDDING_UPDATES}, got "
                             f"{self.embedding_updates!r}")

    def compile_settings(self):
        """The keyword arguments of `compile_model` this config sets."""
        return {name: getattr(self, name) for name in (
            "learning_rate", "warmup_proportion", "jit_compile", "embedding_updates",
            "head_learning_rate_multiplier", "layerwise_lr_decay", "steps_per_execution")}

    def model_path(self):
        """`init_checkpoint`, or `output_dir/model.keras` when not training."""
        if self.init_checkpoint is not None:
            return self.init_checkpoint
        if self.do_train:
            raise ValueError("init_checkpoint is required to train (a Google checkpoint)")
        return os.path.join(self.output_dir, MODEL_FILE)


def run_with_strategy(config, run):
    """`run(config, strategy)` in the config's strategy scope and mixed-precision policy,
    holding the lock of the output dir (`kbert.artifacts.locked`).

    The strategy is made first: a multi-worker strategy must exist before TensorFlow runs an op.
    """
    strategy = distribution.make_strategy(config.distribution_strategy, config.tpu)
    # One writer per output dir: a second run into it is refused at once.
    with artifacts.locked(distribution.worker_output_dir(config.output_dir, strategy)), \
            distribution.mixed_precision_scope(config.mixed_precision), strategy.scope():
        return run(config, strategy)


@dataclasses.dataclass(frozen=True)
class InitSource:
    """What `init_checkpoint` names, resolved.

    Attributes:
        path: str. The `.keras` file or the Google checkpoint path as given.
        is_keras: bool. A `.keras` model (else a Google checkpoint).
        vocab_file: str. The vocab to tokenize with.
        bert_config: `BertConfig`, or None for a `.keras` model (its encoder holds it).
        checkpoint_file: str. The file that fingerprints the weights: the `.keras` file or
            the checkpoint's `.index`.
    """

    path: str
    is_keras: bool
    vocab_file: str
    bert_config: BertConfig | None
    checkpoint_file: str


def resolve_init(path, vocab_file=None, bert_config_file=None):
    """Resolves a start point: a `.keras` model or a Google checkpoint, and its vocab.

    Args:
        path: str. A `.keras` file, or a Google release directory, training directory or
            checkpoint prefix.
        vocab_file: str. Defaults to the `vocab.txt` beside `path`.
        bert_config_file: str. Defaults to the `bert_config.json` beside the checkpoint.

    Returns:
        `InitSource`.
    """
    if path.endswith(".keras"):
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: not found; train first or pass init_checkpoint")
        beside = os.path.join(os.path.dirname(os.path.abspath(path)), tf1.VOCAB_FILE)
        vocab_file = vocab_file or (beside if os.path.exists(beside) else None)
        config, checkpoint_file = None, path
    else:
        checkpoint = tf1.GoogleCheckpoint.open(path, bert_config_file)
        vocab_file = vocab_file or checkpoint.vocab_file
        config, checkpoint_file = checkpoint.config, checkpoint.prefix + ".index"
    if vocab_file is None:
        raise ValueError(f"no {tf1.VOCAB_FILE} beside {path}; pass vocab_file")
    return InitSource(path, path.endswith(".keras"), vocab_file, config, checkpoint_file)


def load_keras_model(path, expected_type, mixed_precision="float32"):
    """Loads a recipe's `.keras` model in `mixed_precision`; checks it is `expected_type`."""
    model = distribution.load_in_precision(path, mixed_precision)
    if not isinstance(model, expected_type):
        raise ValueError(f"{path}: expected a {expected_type.__name__}, got "
                         f"{type(model).__name__}")
    return model


def validate_inputs(config, source, data_files=()):
    """Checks everything a run needs before any training; raises on the first problem.

    Args:
        config: `FineTuningConfig`.
        source: `InitSource` of the model, or None when it is only known after training.
        data_files: sequence of (name, path): the files the steps asked for, e.g.
            `("dev_file", "data/dev.tsv")`.
    """
    for name, path in data_files:
        if not path:
            raise ValueError(f"{name} is required by the steps asked for")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: not found ({name})")
    if source is not None:
        vocab = vocab_lib.load_vocab(source.vocab_file)  # raises on a malformed file
        if source.bert_config is not None:
            bert_config = source.bert_config
            vocab_lib.check_vocab_size(vocab, bert_config.vocab_size, source.path)
            if config.max_seq_length > bert_config.max_position_embeddings:
                raise ValueError(
                    f"max_seq_length={config.max_seq_length} is longer than the model's "
                    f"max_position_embeddings={bert_config.max_position_embeddings}")
        if not config.allow_casing_mismatch:
            casing.check_casing(config.do_lower_case, source.vocab_file, source.path)
    os.makedirs(config.output_dir, exist_ok=True)
    if not os.access(config.output_dir, os.W_OK):
        raise PermissionError(f"{config.output_dir}: output_dir is not writable")
    # The results of a finished run are replaced only by results on the same data.
    artifacts.check_results_data(config.output_dir, EVAL_RESULTS_FILE + ".json",
                                 scored_data(data_files), config.overwrite_output_dir)


def check_trained_head(config, source, model_class):
    """Refuses to evaluate or predict, without training, from a Google checkpoint with no
    `model_class` head (a pretrained release): its head would be random, and so the scores.
    `allow_untrained_head` lets it through (a baseline)."""
    if config.do_train or config.allow_untrained_head or source is None or source.is_keras:
        return
    head = tf1.find_head(tf1.GoogleCheckpoint.open(source.path, source.bert_config).shapes())
    if head != keras.saving.get_registered_name(model_class):
        steps = " and ".join(step for step in ("do_eval", "do_predict") if getattr(config, step))
        raise ValueError(f"{source.path}: no trained {model_class.__name__} head in this "
                         f"checkpoint (a pretrained release?), so {steps} would score a random "
                         "head — add do_train (--do_train), point init_checkpoint at a "
                         "fine-tuned model, or pass allow_untrained_head "
                         "(--allow_untrained_head) for a random-head baseline")


def check_loaded_model(config, model, source):
    """For `.keras` start points, known only once loaded: the vocab has one token per
    embedding row and `max_seq_length` fits the position table."""
    vocab_lib.check_vocab_size(source.vocab_file, model.bert_config.vocab_size, source.path)
    positions = model.bert_config.max_position_embeddings
    if config.max_seq_length > positions:
        raise ValueError(f"max_seq_length={config.max_seq_length} is longer than the model's "
                         f"max_position_embeddings={positions}")


# ----------------------------------------------------------------------------- fit and record


def compile_model(model, num_train_steps, *, learning_rate, warmup_proportion,
                  jit_compile=False, embedding_updates="dense", head_learning_rate_multiplier=1.0,
                  layerwise_lr_decay=None, steps_per_execution=1, **compile_kwargs):
    """Compiles `model` with BERT's AdamW (warm-up then linear decay) under its strategy.

    The arguments after `num_train_steps` are `FineTuningConfig`'s (`compile_settings()`).

    Args:
        model: the task model: an `encoder` (`kbert.BertEncoder`) and a head.
        num_train_steps: int. Steps of the whole run.
        **compile_kwargs: more `model.compile` arguments (e.g. `run_eagerly`).
    """
    multipliers = learning_rate_multipliers(model, head_learning_rate_multiplier,
                                            layerwise_lr_decay)
    if multipliers:
        logging.info("learning-rate factors: %s", multipliers)
    with model.distribute_strategy.scope():  # optimizer variables beside the model's
        optimizer = optimization.create_optimizer(
            learning_rate, num_train_steps, int(num_train_steps * warmup_proportion),
            sparse_embedding_updates=embedding_updates == "sparse",
            learning_rate_multipliers=multipliers)
        # Length-grouped batches have many shapes and XLA compiles each one: off by default.
        model.compile(optimizer=optimizer, jit_compile=jit_compile,
                      steps_per_execution=steps_per_execution, **compile_kwargs)


def learning_rate_multipliers(model, head_multiplier=1.0, layerwise_decay=None):
    """`kbert.tasks.optimization.layer_multipliers` for a task model: its encoder's
    embeddings and transformer layers, and as the head every other layer with weights."""
    if head_multiplier == 1.0 and layerwise_decay is None:
        return {}
    encoder = model.encoder
    head = [layer.name for layer in model.layers
            if layer is not encoder and layer.trainable_weights]
    return optimization.layer_multipliers(
        encoder.embeddings.name, [layer.name for layer in encoder.transformer_layers], head,
        head_multiplier, layerwise_decay)


def fit_and_record(model, dataset, steps_per_epoch, config, *, dev_scores=None, stats=None,
                   compile_kwargs=None):
    """Trains `model` for `config.num_train_epochs`, resumably, and records the run.

    Callbacks: `kbert.tasks.backups.Backup` in `output_dir/backup` (an interrupted run
    restarts at its last complete epoch backup), and `kbert.tasks.epoch_callbacks`:
    `training_log.csv`, TensorBoard in `logs/` when tensorboard is installed, and with
    `dev_scores` the dev scores of every epoch; with `config.keep_best_epoch` the model ends
    with the weights of the best epoch by them.

    Args:
        model: a compiled-or-not task model (it is compiled here).
        dataset: `tf.data.Dataset` of (inputs, targets), shuffled by itself (seeded).
        steps_per_epoch: int.
        config: `FineTuningConfig`.
        dev_scores: `kbert.tasks.epoch_callbacks.DevScores` or None.
        stats: dict. More entries for train_results.json (examples, ...).
        compile_kwargs: dict. More `model.compile` arguments (a loss, metrics).

    Returns:
        dict: what train_results.json holds.
    """
    epochs = int(config.num_train_epochs)
    compile_model(model, steps_per_epoch * epochs, **config.compile_settings(),
                  **(compile_kwargs or {}))
    out = config.output_dir
    backup_dir = os.path.join(out, BACKUP_DIR)
    epoch_seconds = []
    best = (epoch_callbacks.BestEpoch(backup_dir, f"dev_{dev_scores.metric}")
            if dev_scores is not None else None)
    callbacks = [
        # First: epoch_seconds is training time, without the dev scoring.
        keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: epoch_seconds.append(time.perf_counter()),
            on_epoch_end=lambda epoch, logs: epoch_seconds.append(
                time.perf_counter() - epoch_seconds.pop())),
        # Then the dev scores, so that BestEpoch and the loggers see them.
        *([dev_scores, best] if best is not None else []),
        # After BestEpoch: a backup of epoch N always comes with the best of epochs 1..N.
        backups.Backup(backup_dir),
        epoch_callbacks.LogRestored(),
        *epoch_callbacks.recording_callbacks(out),
    ]
    start = time.perf_counter()
    history = model.fit(dataset, epochs=epochs, callbacks=callbacks, verbose=2,
                        shuffle=False)  # the dataset shuffles itself, seeded
    seconds = time.perf_counter() - start
    epochs_run = len(history.epoch)  # fewer than `epochs` when resumed from a backup
    result = {
        **(stats or {}), "epochs": epochs, "epochs_this_run": epochs_run,
        "steps": distribution.global_step(model), "seconds": round(seconds, 2),
        "epoch_seconds": [round(t, 2) for t in epoch_seconds],
        "final_loss": float(history.history["loss"][-1]) if epochs_run else None,
    }
    if "examples" in result and seconds:
        result["examples_per_second"] = round(result["examples"] * epochs_run / seconds, 2)
    if best is not None:
        result.update(epoch_callbacks.keep_epoch(best, config.keep_best_epoch, epochs))
    # backup/ stays until the outputs are written (`run_manifest.finish_training`): a run that
    # dies writing them (a full disk) resumes from it rather than from the start.
    io.write_json(os.path.join(out, TRAIN_RESULTS_FILE), result)
    logging.info("Training done: %s", epoch_callbacks.brief(result))
    return result


# ----------------------------------------------------------------------------- outputs


def write_outputs(output_dir, model, vocab_file, export_settings):
    """The shared output layout: model.keras, bert_model.ckpt.* (+ `checkpoint`), vocab.txt
    (+ added_tokens.txt), bert_config.json and export_settings.json (keyword arguments of
    `export_saved_model`).

    `bert_model.ckpt` is the model with its head in Google's layout
    (`kbert.checkpoints.save_google_checkpoint`), weights only, so the output dir is also a
    Google release directory: Google's run_classifier.py / run_squad.py and
    `from_google_checkpoint` read it. Each file is written to a temporary name and renamed.
    """
    save_model(model, os.path.join(output_dir, MODEL_FILE))
    # Also writes bert_config.json and the vocab.txt beside it.
    tf1.save_google_checkpoint(model, os.path.join(output_dir, tf1.RELEASE_PREFIX),
                               vocab_file=vocab_file)
    added = os.path.join(os.path.dirname(os.path.abspath(vocab_file)),
                         vocab_lib.ADDED_TOKENS_FILE)
    if os.path.exists(added):
        io.copy_file(added, os.path.join(output_dir, vocab_lib.ADDED_TOKENS_FILE))
    io.write_json(os.path.join(output_dir, EXPORT_SETTINGS_FILE), export_settings)


def read_export_settings(model_path):
    """The `export_settings.json` beside a recipe's `model.keras`, or {} if there is none."""
    return io.read_json(os.path.join(os.path.dirname(os.path.abspath(model_path)),
                                   EXPORT_SETTINGS_FILE))


def save_model(model, path):
    """Saves `model` to `path` atomically, with its weights and config but no optimizer."""
    if getattr(model, "optimizer", None) is not None:
        # A fresh copy has no optimizer: its state stays in the backup, not in model.keras.
        with model.distribute_strategy.scope():
            copy = type(model).from_config(model.get_config())
        copy.set_weights(model.get_weights())
        model = copy
    with io.atomic_files(os.path.dirname(os.path.abspath(path))) as tmp:
        model.save(os.path.join(tmp, os.path.basename(path)))


def write_eval_results(output_dir, results, global_step, flat=None, data_files=(), **extra):
    """Writes eval_results.txt (`split_metric = value` lines) and eval_results.json.

    Args:
        output_dir: str.
        results: dict of split -> dict of scores (nested dicts allowed in the JSON).
        global_step: int or None. Training steps of the model scored.
        flat: dict of `split_metric` -> value for the .txt; defaults to every number of
            `results`.
        data_files: sequence of (name, path) of the run's data: the JSON's "data" records the
            fingerprints of those scored, which `validate_inputs` compares on a later run.
        **extra: more top-level entries (task, kept epoch, ...), in both files.
    """
    if flat is None:
        flat = {f"{split}_{name}": value for split, scores in results.items()
                for name, value in scores.items() if not isinstance(value, (dict, list))}
    flat = {**flat, **{k: v for k, v in extra.items() if not isinstance(v, (dict, list))},
            "global_step": global_step}
    with io.atomic_write(os.path.join(output_dir, EVAL_RESULTS_FILE + ".txt")) as f:
        f.writelines(f"{key} = {flat[key]}\n" for key in sorted(flat))
    io.write_json(os.path.join(output_dir, EVAL_RESULTS_FILE + ".json"),
                  {**extra, "global_step": global_step, **results,
                   "data": scored_data(data_files)})


def scored_data(data_files):
    """{name: fingerprint} of the data files that are scored or predicted (not trained on)."""
    return {name: artifacts.fingerprint(path) for name, path in data_files
            if path and not name.startswith("train")}


def kept_epoch_summary(train_results):
    """The entries eval_results gets about which epoch's model was scored."""
    if not train_results or "kept" not in train_results:
        return {}
    return {k: train_results[k] for k in ("kept", "kept_epoch", "best_epoch", "dev_metric")
            if k in train_results}

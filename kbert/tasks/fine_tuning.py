"""The skeleton every fine-tuning recipe shares: config, start point, checks, fit and record.

A recipe (`kbert.tasks.glue`, `ner`, `squad`) is a reader, a head and a metric; the rest is here:

    (`kbert.tasks.configs.FineTuningConfig`: the settings every run has; `kbert.tasks.template`:
    the order a recipe's run follows; `kbert.models.opening.open_model`: what
    `init_checkpoint` names and the vocab that goes with it.)
    validate_inputs    files exist and parse, lengths fit the model, casing matches the vocab
                       (`kbert.tasks.casing`), the output dir is writable: before any training.
    (`kbert.tasks.run_manifest` resumes only the same run and never silently overwrites.)
    fit_and_record     compile, fit on the path pretraining takes too
                       (`kbert.tasks.fitting`: resumable, timed, CSV and TensorBoard logs)
                       with the dev scores and best epoch of `kbert.tasks.epoch_callbacks`,
                       write train_results.json.
    write_outputs      the output layout every recipe shares (its names: `kbert.artifacts`):

        model.keras              weights and config only (no optimizer state)
        bert_model.ckpt.*, checkpoint   the same weights, head included, in Google's format
        vocab.txt (+ added_tokens.txt), bert_config.json
        export_settings.json     what `tools/export_saved_model.py --model=OUTPUT_DIR` needs
        eval_results.txt/.json   `write_eval_results`; predictions beside them
        training_log.csv, logs/  per-epoch scores (CSV and TensorBoard)
        train_results.json, run_manifest.json; backup/ until the outputs are written
"""

import math
import os

import keras
from absl import logging

from kbert import artifacts
from kbert import io
from kbert.checkpoints import tf1
from kbert.models import opening
from kbert.tasks import casing
from kbert.tasks import epoch_callbacks
from kbert.tasks import fitting
from kbert.tasks import optimization
from kbert.tasks import precision
from kbert.tasks import strategies
from kbert.tokenization import vocab as vocab_lib


def load_keras_model(source, expected_type, mixed_precision="float32"):
    """Loads the `.keras` model of `source` (an `OpenedModel`) in `mixed_precision`; checks it
    is `expected_type`."""
    model = precision.load_in_precision(source.keras_file, mixed_precision)
    if not isinstance(model, expected_type):
        raise ValueError(f"{source.keras_file}: expected a {expected_type.__name__}, got "
                         f"{type(model).__name__}")
    return model


def validate_inputs(config, source, data_files=()):
    """Checks everything a run needs before any training; raises on the first problem.

    Args:
        config: `FineTuningConfig`.
        source: `kbert.models.opening.OpenedModel`, or None for a model from scratch.
        data_files: sequence of (name, path): the files the steps asked for, e.g.
            `("dev_file", "data/dev.tsv")`.
    """
    for name, path in data_files:
        if not path:
            raise ValueError(f"{name} is required by the steps asked for")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: not found ({name})")
    if source is not None:
        vocab = source.vocab()  # raises on a missing or malformed file
        if source.bert_config is not None:
            bert_config = source.bert_config
            vocab_lib.check_vocab_size(vocab, bert_config.vocab_size, source.path)
            if config.max_seq_length > bert_config.max_position_embeddings:
                raise ValueError(
                    f"max_seq_length={config.max_seq_length} is longer than the model's "
                    f"max_position_embeddings={bert_config.max_position_embeddings}")
        if not config.allow_casing_mismatch:
            casing.check_casing(config.do_lower_case, vocab, source.path)
    os.makedirs(config.output_dir, exist_ok=True)
    if not os.access(config.output_dir, os.W_OK):
        raise PermissionError(f"{config.output_dir}: output_dir is not writable")
    # The results of a finished run are replaced only by results on the same data.
    artifacts.check_results_data(config.output_dir, artifacts.EVAL_RESULTS_FILE + ".json",
                                 scored_data(data_files), config.overwrite_output_dir)


def check_trained_head(config, source, model_class):
    """Refuses to evaluate or predict, without training, from a checkpoint with no
    `model_class` head (a pretrained release): its head would be random, and so the scores.
    `allow_untrained_head` lets it through (a baseline). A `.keras` model's type is checked
    when it is loaded (`load_keras_model`)."""
    if (config.do_train or config.allow_untrained_head or source is None
            or source.kind == opening.KERAS):
        return
    head = tf1.find_head(source.google_checkpoint().shapes())
    if head != keras.saving.get_registered_name(model_class):
        steps = " and ".join(step for step in ("do_eval", "do_predict") if getattr(config, step))
        raise ValueError(f"{source.path}: no trained {model_class.__name__} head in this "
                         f"checkpoint (a pretrained release?), so {steps} would score a random "
                         "head — add do_train (--do_train), point init_checkpoint at a "
                         "fine-tuned model, or pass allow_untrained_head "
                         "(--allow_untrained_head) for a random-head baseline")


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
                   compile_kwargs=None, parts=None, parts_per_epoch=1):
    """Trains `model` for `config.num_train_epochs`, resumably, and records the run.

    Compiles `model` (`compile_model`) and fits it on the path every recipe takes
    (`kbert.tasks.fitting.fit_resumably`: backups in `output_dir/backup`, an interrupted run
    restarting at its last complete epoch; `training_log.csv`, TensorBoard in `logs/`;
    progress), with `dev_scores` the dev scores of every epoch; with
    `config.keep_best_epoch` the model ends with the weights of the best epoch by them.

    Args:
        model: a compiled-or-not task model (it is compiled here).
        dataset: a function first_epoch (0-based) -> `tf.data.Dataset` of (inputs, targets)
            of the epochs from `first_epoch` on, each epoch's order a function of the seed
            and the epoch number (`kbert.data.pipeline.training_epochs`): the backup is
            restored first and the data start at its epoch, so a resumed run ends with the
            weights of the uninterrupted one. Every worker builds the same stream and keeps
            its part of each global batch (`strategies.shard_by_data`). Or a
            `tf.data.Dataset` of one epoch that reshuffles itself: a resumed run then sees
            other orders.
        steps_per_epoch: int.
        config: `FineTuningConfig`.
        dev_scores: `kbert.tasks.epoch_callbacks.DevScores` or None.
        stats: dict. More entries for train_results.json (examples, ...).
        compile_kwargs: dict. More `model.compile` arguments (a loss, metrics).
        parts: int or None. Keras epochs to fit, each of `steps_per_epoch` steps and ending
            with a backup, when an epoch is cut into parts (SQuAD: at most
            save_checkpoints_steps steps between backups) or the run is a fraction of epochs.
            Defaults to `config.num_train_epochs` whole epochs.
        parts_per_epoch: int. With `parts`, the parts of one pass over the data: the dev set
            is scored, and the best epoch picked, after every that many parts and after the
            last. Defaults to 1.

    Returns:
        dict: what train_results.json holds.
    """
    epochs = parts or int(config.num_train_epochs)
    settings = config.compile_settings()
    if callable(dataset):
        # Every worker builds the same stream and keeps its part of each global batch.
        dataset = _sharded_by_data(dataset)
        # One iterator runs through all epochs: a graph call of steps_per_execution steps
        # must not cross an epoch's end, so it is the largest divisor of the epoch up to it.
        wanted = settings.get("steps_per_execution", 1)
        settings["steps_per_execution"] = max(
            n for n in range(1, wanted + 1) if steps_per_epoch % n == 0)
        if settings["steps_per_execution"] != wanted:
            logging.info("steps_per_execution %d (of the %d steps of an epoch), not %d",
                         settings["steps_per_execution"], steps_per_epoch, wanted)
    compile_model(model, steps_per_epoch * epochs, **settings, **(compile_kwargs or {}))
    best = (epoch_callbacks.BestEpoch(os.path.join(config.output_dir, artifacts.BACKUP_DIR),
                                      f"dev_{dev_scores.metric}")
            if dev_scores is not None else None)
    scoring = [dev_scores, best] if best is not None else []
    if scoring and parts_per_epoch > 1:
        scoring = [epoch_callbacks.AtEpochEnds(scoring, parts_per_epoch, epochs)]
    record, _ = fitting.fit_resumably(model, dataset, steps_per_epoch, epochs, config,
                                      epoch_logs=scoring)
    seconds, epochs_run = record["seconds"], record["epochs_this_run"]
    result = {**(stats or {}), "epochs": config.num_train_epochs if parts else epochs,
              **({"parts": parts} if parts else {}), **record}
    if "examples" in result and seconds:
        result["examples_per_second"] = round(result["examples"] * epochs_run / seconds, 2)
    if best is not None:
        result.update(epoch_callbacks.keep_epoch(best, config.keep_best_epoch,
                                                 math.ceil(epochs / parts_per_epoch)))
    # backup/ stays until the outputs are written (`run_manifest.finish_training`): a run that
    # dies writing them (a full disk) resumes from it rather than from the start.
    io.write_json(os.path.join(config.output_dir, artifacts.TRAIN_RESULTS_FILE), result)
    logging.info("Training done: %s", epoch_callbacks.brief(result))
    return result


def _sharded_by_data(dataset):
    return lambda first_epoch: strategies.shard_by_data(dataset(first_epoch))


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
    save_model(model, os.path.join(output_dir, artifacts.MODEL_FILE))
    # Also writes bert_config.json and the vocab.txt beside it.
    tf1.save_google_checkpoint(model, os.path.join(output_dir, tf1.RELEASE_PREFIX),
                               vocab_file=vocab_file)
    added = os.path.join(os.path.dirname(os.path.abspath(vocab_file)),
                         vocab_lib.ADDED_TOKENS_FILE)
    if os.path.exists(added):
        io.copy_file(added, os.path.join(output_dir, vocab_lib.ADDED_TOKENS_FILE))
    io.write_json(os.path.join(output_dir, artifacts.EXPORT_SETTINGS_FILE), export_settings)


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
    with io.atomic_write(os.path.join(output_dir, artifacts.EVAL_RESULTS_FILE + ".txt")) as f:
        f.writelines(f"{key} = {flat[key]}\n" for key in sorted(flat))
    io.write_json(os.path.join(output_dir, artifacts.EVAL_RESULTS_FILE + ".json"),
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

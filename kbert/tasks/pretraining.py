"""Pretraining with `model.fit`: BertPretrainer, Google's MLM + NSP losses, BERT's AdamW, resumable.

The recipe of Google's run_pretraining.py on Keras parts. The loss is Google's: masked-LM
cross-entropy averaged over the real predictions (`masked_lm_weights`), plus the next-sentence
cross-entropy averaged over the batch. It fits on the path the fine-tuning recipes take
(`kbert.tasks.fitting`), whose Keras callbacks do what the Estimator did: a backup (an
interrupted run resumes from its last complete one, every `save_checkpoints_steps` steps:
each is a Keras epoch), per-epoch logs, and progress (steps, steps/s and ETA every
`log_every_n_steps` steps, as the Estimator's global_step/sec lines); `SaveModel` adds
`pretrainer.keras`. The output dir is guarded (`kbert.artifacts`): one run at a time, resumed
only by the same run (`run_manifest.json`), never an input's directory; a finished run, or
other files there, need `overwrite_output_dir` (which removes only what a run writes).

Files written to `output_dir`:
    model.ckpt-<steps>.*, bert_config.json, vocab.txt   the final Google checkpoint (Google's
                       modeling.py and `kbert.BertPretrainer.from_google_checkpoint` read it).
    pretrainer.keras   the Keras model after the latest epoch; `backup/` until the end.
    run_manifest.json  what identifies the run (settings, fingerprints) and if it finished.
    train_results.json steps, seconds, examples per second and the last epoch's metrics.
    training_log.csv, logs/   the metrics of every epoch (CSV and TensorBoard).
    eval_results.txt   Google's "key = value" lines, when an eval input is given.

Input: Google's pretraining TFRecords (`input_format="tfrecord"`), or raw text
(`input_format="text"` or "wikiextractor") paired and masked on the fly by
`kbert.data.pretraining_text_dataset`, a new mask every epoch, with `pair_task` "nsp", "sop"
(ALBERT's sentence order, on the same two-way head) or "none" (masked LM only, no second head).

Runs on one device or several (`distribution_strategy`), in mixed precision if asked; see
`kbert.tasks.strategies`. `train_batch_size` is global: split over the replicas. With
several workers each reads its share of the input files (give at least as many files as
workers), or of the raw text (one byte range each).
"""

import collections
import dataclasses
import math
import os
import shutil

import keras
from absl import logging

from kbert import artifacts
from kbert import io
from kbert import text_files
from kbert import tokenization
from kbert.checkpoints import tf1
from kbert.config import BertConfig
from kbert.data import corpus
from kbert.data.pretraining import record_input
from kbert.data.pretraining import text_input
from kbert.models import opening
from kbert.models.encoder import BertEncoder
from kbert.models.pretrainer import BertPretrainer
from kbert.tasks import backups
from kbert.tasks import configs
from kbert.tasks import epoch_callbacks
from kbert.tasks import fitting
from kbert.tasks import optimization
from kbert.tasks import progress
from kbert.tasks import strategies
from kbert.tasks.configs import PretrainingConfig

MODEL_FILE = "pretrainer.keras"
# Settings that do not change what training does: a restart may change them.
_NOT_IN_MANIFEST = ("output_dir", "overwrite_output_dir", "eval_input_file", "max_eval_steps",
                    "eval_batch_size", "log_every_n_steps")
# What a run writes: --overwrite_output_dir removes it; without a manifest, it refuses a run.
_RUN_FILES = (artifacts.BACKUP_DIR, MODEL_FILE, "model.ckpt-*", "checkpoint",
              artifacts.BERT_CONFIG_FILE, artifacts.VOCAB_FILE, artifacts.TRAIN_RESULTS_FILE,
              artifacts.EVAL_RESULTS_FILE + ".txt", epoch_callbacks.TRAINING_LOG_FILE,
              epoch_callbacks.LOG_DIR)
TFRECORD = configs.TFRECORD


def open_init(config):
    """`init_checkpoint` opened (`kbert.models.opening.open_model`: any format it reads), or
    None for a model from `bert_config_file`. A run opens it once and passes it on."""
    if not config.init_checkpoint:
        return None
    return opening.open_model(config.init_checkpoint, config.vocab_file,
                              config.bert_config_file)


def model_config(config, source=None):
    """The `BertConfig` of the model a run trains: the start point's (`source`, from
    `open_init`; None for a `.keras` file without a kbert encoder), else `bert_config_file`'s."""
    if source is not None:
        return source.bert_config
    return BertConfig.from_json_file(config.bert_config_file)


def resolve_vocab_file(config, source=None):
    """The vocab of a run: `vocab_file`, else the one beside the start point (`source`, from
    `open_init`) or beside `bert_config_file`.

    Raises:
        FileNotFoundError: none found (the output must be a release directory with a vocab,
            and raw text needs one to tokenize), naming where it looked.
    """
    vocab_file = config.vocab_file or (source.vocab_file if source is not None else None)
    if vocab_file is None and config.bert_config_file:
        beside = os.path.join(os.path.dirname(config.bert_config_file), artifacts.VOCAB_FILE)
        vocab_file = beside if os.path.isfile(beside) else None
    if vocab_file is None:
        looked = [os.path.join(p if os.path.isdir(p) else os.path.dirname(p),
                               artifacts.VOCAB_FILE)
                  for p in (config.init_checkpoint, config.bert_config_file) if p]
        raise FileNotFoundError(
            f"no {artifacts.VOCAB_FILE} found (looked for {', '.join(looked)}); pass "
            "vocab_file (--vocab_file): the output is a Google release directory, which holds "
            "its vocab")
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"{vocab_file}: vocab_file not found")
    return vocab_file


def pretraining_losses(sentence_head=True):
    """Google's run_pretraining.py losses, keyed by `BertPretrainer` output.

    `mlm_logits`: cross-entropy summed over predictions weighted by `masked_lm_weights`,
    divided by the sum of the weights; `nsp_logits` (with `sentence_head`): mean
    cross-entropy. `fit` adds them.
    """
    losses = {"mlm_logits": keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight")}
    if sentence_head:
        losses["nsp_logits"] = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return losses


def pretraining_metrics(sentence_head=True):
    """Accuracy of each head; as weighted metrics, MLM accuracy counts real predictions only.

    Keras names them by output (`mlm_logits_accuracy`, ...); `metric_names` gives Google's.
    """
    return {name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
            for name in pretraining_losses(sentence_head)}


def metric_names(pair_task="nsp"):
    """{Keras' name: Google's} of the pretrainer's losses and metrics under `pair_task`.

    As Google's run_pretraining.py: masked_lm_loss and masked_lm_accuracy, and
    next_sentence_loss and next_sentence_accuracy; under "sop", sentence_order_loss and
    sentence_order_accuracy (the same head learns sentence order). "loss" is their sum.
    """
    names = {"mlm_logits_loss": "masked_lm_loss", "mlm_logits_accuracy": "masked_lm_accuracy"}
    if pair_task == "none":  # one output: Keras leaves its name out
        return {**names, "accuracy": "masked_lm_accuracy"}
    second = {"nsp": "next_sentence", "sop": "sentence_order"}[pair_task]
    return {**names, "nsp_logits_loss": f"{second}_loss",
            "nsp_logits_accuracy": f"{second}_accuracy"}


def named_metrics(metrics, pair_task="nsp"):
    """`metrics` (Keras' logs) under `metric_names`; under "none" masked_lm_loss is the loss."""
    names = metric_names(pair_task)
    named = {names.get(key, key): value for key, value in metrics.items()}
    if pair_task == "none" and "loss" in named:
        named["masked_lm_loss"] = named["loss"]
    return named


class MetricNames(keras.callbacks.Callback):
    """Renames the metrics in the logs of every step and epoch of `fit` and `evaluate`
    (`named_metrics`), so that the callbacks after it (progress, training_log.csv,
    TensorBoard) and the history see Google's names.

    Args:
        pair_task: str. `PretrainingConfig.pair_task`.
    """

    def __init__(self, pair_task):
        super().__init__()
        self.pair_task = pair_task

    def on_train_batch_end(self, batch, logs=None):
        self._rename(logs)

    def on_epoch_end(self, epoch, logs=None):
        self._rename(logs)

    def on_test_batch_end(self, batch, logs=None):
        self._rename(logs)

    def on_test_end(self, logs=None):
        self._rename(logs)

    def _rename(self, logs):
        if logs:  # in place: Keras hands the same dict to the callbacks after this one
            named = named_metrics(logs, self.pair_task)
            logs.clear()
            logs.update(named)


def compile_pretrainer(model, optimizer, jit_compile=False, steps_per_execution=1):
    """Compiles a `BertPretrainer` for `fit` on `kbert.data.pretraining_dataset` batches."""
    with model.distribute_strategy.scope():  # optimizer variables beside the model's
        model.compile(optimizer=optimizer, loss=pretraining_losses(model.sentence_head),
                      weighted_metrics=pretraining_metrics(model.sentence_head),
                      jit_compile=jit_compile, steps_per_execution=steps_per_execution)
    return model


def build_pretrainer(config, source=None):
    """The model to train and its vocab file: from `init_checkpoint`, or new from the config.

    The second head follows `pair_task` ("none": none). Built in the current strategy scope
    and dtype policy. `source`: `open_init(config)` if the caller has it (else opened here).
    """
    sentence_head = config.pair_task != "none"
    source = source or open_init(config)
    vocab_file = resolve_vocab_file(config, source)
    if source is not None:
        model = BertPretrainer.from_google_checkpoint(
            source.google_checkpoint(), heads=config.init_heads, sentence_head=sentence_head)
        return model, vocab_file
    bert_config = BertConfig.from_json_file(config.bert_config_file)
    return BertPretrainer(BertEncoder(**bert_config.encoder_kwargs()),
                          sentence_head=sentence_head), vocab_file


def epoch_steps(num_train_steps, save_checkpoints_steps):
    """The largest divisor of `num_train_steps` that is at most `save_checkpoints_steps`."""
    limit = min(save_checkpoints_steps, num_train_steps)
    return max(d for d in range(1, limit + 1) if num_train_steps % d == 0)


def run_pretraining(config: PretrainingConfig) -> dict:
    """Trains (or resumes), saves the Google checkpoint, evaluates if asked.

    Args:
        config: `PretrainingConfig`.

    Returns:
        dict with "train" (steps, seconds, examples per second, last metrics), "checkpoint"
        (the Google checkpoint prefix) and, with an eval input, "eval".
    """
    strategies.one_intra_op_thread_for(config.cpu_batch_parts)  # before the checks' first op
    source = open_init(config)
    check_inputs(config, source)
    with strategies.run_scope(config) as (strategy, out):
        return _run_pretraining(config, strategy, out, source)


def check_inputs(config, source=None):
    """Checks the vocab, the input and the eval input against the model before any work,
    naming the file at fault.

    The vocab: found (`resolve_vocab_file`), read as `kbert.tokenization.load_vocab` reads it
    (no empty or repeated token) and one token per row of the model's embedding table.
    Records: the schema and lengths of the run (`record_input.check_record_files`: the first
    record of each file, every record's CRC), written with this vocab (their sidecar's
    vocab_sha256). Raw text: text (its first 4 KiB), not empty, with a document of text
    (`kbert.data.corpus.check_documents`), UTF-8 on every line. Their max_seq_length: at most
    the model's max_position_embeddings. `source`: `open_init(config)` if the caller has it.
    """
    vocab = tokenization.load_vocab(resolve_vocab_file(config, source))
    bert_config = model_config(config, source)
    model = source.path if source is not None else config.bert_config_file
    if bert_config is not None:
        tokenization.check_vocab_size(vocab, bert_config.vocab_size, model)
    lengths = {}  # what has a max_seq_length -> it
    for pattern in (config.input_file, config.eval_input_file):
        if not pattern:
            continue
        if config.input_format == TFRECORD:
            length = record_input.check_record_files(
                pattern, config.max_seq_length, config.max_predictions_per_seq, vocab=vocab)
            lengths[f"{pattern}: records of max_seq_length={length}"] = length
            continue
        files = corpus.list_input_files(pattern)
        for path in files:
            text_files.check_text(path, f"input_format={config.input_format!r} reads raw "
                                  "text (TFRecords need input_format='tfrecord')")
        if not any(os.path.getsize(path) for path in files):
            raise ValueError(f"{pattern}: the input is empty")
        corpus.check_documents(files, config.input_format)
        text_files.check_utf8(files, "expected UTF-8 text: re-encode the file, or write "
                              "records with kbert-create-pretraining-data --skip_bad_lines")
        length = config.text_config.max_seq_length
        lengths[f"max_seq_length={length}"] = length
    positions = bert_config and bert_config.max_position_embeddings
    for what, length in lengths.items():
        if positions and length > positions:
            fix = "pass" if what.startswith("max_seq_length") else "write records with"
            raise ValueError(f"{what}: longer than the model's max_position_embeddings="
                             f"{positions} ({model}) — {fix} max_seq_length={positions} or "
                             "less, or pick a model with more positions")


def _run_pretraining(config, strategy, out, source):
    keras.utils.set_random_seed(config.seed)
    # The inputs are checked (`check_inputs`): the output dir is claimed, resumed only by the
    # same run, before the model is built (a refused run ends at once). A run that fails
    # after this, before its first backup, is taken over by the next one.
    manifest = manifest_for(config, source)
    # Only its own files: one found there without a manifest, or an input in the way (the
    # start point's directory), refuses the run; --overwrite_output_dir removes only its own.
    inputs = [("init_checkpoint", config.init_checkpoint),
              ("bert_config_file", config.bert_config_file)]
    inputs += [(name, manifest[name]["path"]) for name in ("init_checkpoint", "vocab_file")
               if manifest[name]]
    inputs += [("input_file", entry["path"]) for entry in manifest["data"].values()]
    claim = artifacts.claim(
        out, manifest, overwrite_output_dir=config.overwrite_output_dir, owned=_RUN_FILES,
        progress=(artifacts.BACKUP_DIR,), inputs=inputs, exclusive=True)
    model, vocab_file = build_pretrainer(config, source)
    model.batch_parts = config.cpu_batch_parts
    optimizer = optimization.create_optimizer(
        config.learning_rate, config.num_train_steps, config.num_warmup_steps)
    compile_pretrainer(model, optimizer, jit_compile=config.jit_compile,
                       steps_per_execution=config.steps_per_execution)
    steps = epoch_steps(config.num_train_steps, config.save_checkpoints_steps)
    record, history = fitting.fit_resumably(
        model,
        # Built once the backup is restored: the input starts after the batches the restored
        # steps trained on.
        lambda first_epoch: pretraining_input(config, strategy, vocab_file,
                                              strategies.global_step(model)),
        steps, config.num_train_steps // steps, dataclasses.replace(config, output_dir=out),
        epoch_logs=[MetricNames(config.pair_task)],
        callbacks=[backups.SaveModel(os.path.join(out, MODEL_FILE))])
    trained = record["epochs_this_run"] * steps  # this session's steps (after a resume, fewer)
    seconds = record["seconds"]
    results = {"train": {
        "global_step": record["steps"],
        "steps_this_run": trained,
        "seconds": round(seconds, 1),
        "examples_per_second": round(trained * config.train_batch_size / max(seconds, 1e-9), 1),
        # No metrics when a resumed run had no step left (it died writing its outputs).
        **({k: float(v[-1]) for k, v in history.history.items()} if history.epoch else {}),
    }}
    prefix = os.path.join(out, f"model.ckpt-{config.num_train_steps}")
    tf1.save_google_checkpoint(model, prefix, vocab_file=vocab_file)
    results["checkpoint"] = prefix
    logging.info("Google checkpoint written: %s", prefix)
    if config.eval_input_file:
        results["eval"] = evaluate(model, config, vocab_file)
        with io.atomic_write(os.path.join(out, artifacts.EVAL_RESULTS_FILE + ".txt")) as f:
            for key in sorted(results["eval"]):
                f.write(f"{key} = {results['eval'][key]}\n")
    io.write_json(os.path.join(out, artifacts.TRAIN_RESULTS_FILE), results)
    claim.finish()
    shutil.rmtree(os.path.join(out, artifacts.BACKUP_DIR), ignore_errors=True)  # see above
    return results


def manifest_for(config, source=None):
    """What identifies a pretraining run (`kbert.artifacts.claim`): the settings that change
    what training does, the model's config, and the SHA-256 of checkpoint, vocab and input.
    `source`: `open_init(config)` if the caller has it (else opened here)."""
    settings = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)
                if field.name not in _NOT_IN_MANIFEST}
    settings = {k: v if isinstance(v, (str, int, float, bool, type(None))) else type(v).__name__
                for k, v in settings.items()}
    source = source or open_init(config)
    bert_config = model_config(config, source)
    init = source and artifacts.fingerprint(source.checkpoint_file)
    files = (record_input.record_files(config.input_file) if config.input_format == TFRECORD
             else corpus.list_input_files(config.input_file))
    return {
        "settings": settings,
        "bert_config": bert_config.to_dict(),
        "init_checkpoint": init,
        "vocab_file": artifacts.fingerprint(resolve_vocab_file(config, source)),
        "data": {str(i): artifacts.fingerprint(path) for i, path in enumerate(files)},
        "kbert_version": artifacts.kbert_version(),
    }


def pretraining_input(config, strategy, vocab_file, start_step=0):
    """The training input: TFRecords sharded by file (TensorFlow's AUTO policy), or raw text,
    one byte range per input pipeline (`distribute_datasets_from_function`).

    Both continue at global step `start_step`: a run resumed there (on one worker) sees the
    batches of the uninterrupted run. The input before it is read again: records are not
    parsed, and raw text is tokenized and paired but not masked (BENCHMARKS.md, "Resuming
    from raw text", has what that costs).
    """
    if config.input_format == TFRECORD:
        return record_input.pretraining_dataset(
            config.input_file, config.train_batch_size, max_seq_length=config.max_seq_length,
            max_predictions_per_seq=config.max_predictions_per_seq, seed=config.seed,
            skip_batches=start_step)

    def dataset_fn(input_context):
        return text_input.pretraining_text_dataset(
            config.input_file, vocab_file,
            input_context.get_per_replica_batch_size(config.train_batch_size),
            config=config.text_config, pair_task=config.pair_task,
            input_format=config.input_format, do_lower_case=config.do_lower_case,
            seed=config.seed, input_context=input_context,
            # Each step takes one batch for every replica this pipeline feeds.
            skip_batches=start_step * (input_context.num_replicas_in_sync
                                       // input_context.num_input_pipelines))

    return strategy.distribute_datasets_from_function(dataset_fn)


def evaluate(model, config, vocab_file=None):
    """Google's eval metric names over `max_eval_steps` batches of the eval input, in order.

    Raw-text eval input is paired and masked with `seed` (the same every run).
    """
    if config.input_format == TFRECORD:
        dataset = record_input.pretraining_dataset(
            config.eval_input_file, config.eval_batch_size,
            max_seq_length=config.max_seq_length,
            max_predictions_per_seq=config.max_predictions_per_seq, shuffle=False, repeat=True)
    else:
        dataset = text_input.pretraining_text_dataset(
            config.eval_input_file, vocab_file or resolve_vocab_file(config, open_init(config)),
            config.eval_batch_size, config=config.text_config, pair_task=config.pair_task,
            input_format=config.input_format, do_lower_case=config.do_lower_case,
            seed=config.seed, shuffle_buffer=0)
    metrics = model.evaluate(
        dataset, steps=config.max_eval_steps, return_dict=True, verbose=0,
        callbacks=[MetricNames(config.pair_task),
                   progress.PredictionProgress(config.log_every_n_steps,
                                               examples_per_step=config.eval_batch_size)])
    return {**named_metrics(metrics, config.pair_task),
            "global_step": strategies.global_step(model)}


def unigram_accuracy(file_pattern, max_batches=None, **kwargs):
    """Accuracy of always predicting the most frequent masked token: the baseline to beat."""
    counts = collections.Counter()
    dataset = record_input.pretraining_dataset(
        file_pattern, 256, shuffle=False, repeat=False, drop_remainder=False, **kwargs)
    for _, labels, weights in dataset.take(-1 if max_batches is None else max_batches):
        counts.update(labels["mlm_logits"].numpy()[weights["mlm_logits"].numpy() > 0].tolist())
    return max(counts.values()) / sum(counts.values()) if counts else math.nan

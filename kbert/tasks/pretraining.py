"""Pretraining with `model.fit`: BertPretrainer, Google's MLM + NSP losses, BERT's AdamW, resumable.

The recipe of Google's run_pretraining.py on Keras parts. The loss is Google's: masked-LM
cross-entropy averaged over the real predictions (`masked_lm_weights`), plus the next-sentence
cross-entropy averaged over the batch. Keras callbacks do what the Estimator did:
`kbert.tasks.backups.Backup` (an interrupted run resumes from its last complete backup, one
every `save_checkpoints_steps` steps) and `SaveModel` (`pretrainer.keras`). The output dir is
guarded (`kbert.artifacts`): one run at a time, resumed only by the same run
(`run_manifest.json`), a finished run replaced only with `overwrite_output_dir`.

Files written to `output_dir`:
    model.ckpt-<steps>.*, bert_config.json, vocab.txt   the final Google checkpoint (Google's
                       modeling.py and `kbert.BertPretrainer.from_google_checkpoint` read it).
    pretrainer.keras   the Keras model after the latest epoch; `backup/` until the end.
    run_manifest.json  what identifies the run (settings, fingerprints) and if it finished.
    train_results.json steps, seconds, examples per second and the last epoch's metrics.
    eval_results.txt   Google's "key = value" lines, when an eval input is given.

Input: Google's pretraining TFRecords (`input_format="tfrecord"`), or raw text
(`input_format="text"` or "wikiextractor") paired and masked on the fly by
`kbert.data.pretraining_text_dataset`, a new mask every epoch, with `pair_task` "nsp", "sop"
(ALBERT's sentence order, on the same two-way head) or "none" (masked LM only, no second head).

Runs on one device or several (`distribution_strategy`), in mixed precision if asked; see
`kbert.tasks.distribution`. `train_batch_size` is global: split over the replicas. With
several workers each reads its share of the input files (give at least as many files as
workers), or of the raw text (one byte range each).
"""

import collections
import dataclasses
import math
import os
import shutil
import time

import keras
import tensorflow as tf
from absl import logging

from kbert import artifacts
from kbert import io
from kbert import ranges
from kbert.checkpoints import tf1
from kbert.config import BertConfig
from kbert.data import corpus
from kbert.data import pretraining
from kbert.data import pretraining_input
from kbert.data import pretraining_text
from kbert.data import records
from kbert.data import text_files
from kbert.models.encoder import BertEncoder
from kbert.models.pretrainer import BertPretrainer
from kbert.tasks import backups
from kbert.tasks import distribution
from kbert.tasks import optimization

MODEL_FILE = "pretrainer.keras"
BACKUP_DIR = "backup"
# Settings that do not change what training does: a restart may change them.
_NOT_IN_MANIFEST = ("output_dir", "overwrite_output_dir", "eval_input_file", "max_eval_steps",
                    "eval_batch_size")
# What a run writes: --overwrite_output_dir removes it; without a manifest, it refuses a run.
_RUN_FILES = (BACKUP_DIR, MODEL_FILE, "model.ckpt-*", "checkpoint", "train_results.json",
              "eval_results.txt")
TFRECORD = "tfrecord"
INPUT_FORMATS = (TFRECORD, *corpus.INPUT_FORMATS)
_DATA_RANGES = ranges.of(pretraining.PretrainingDataConfig)  # the raw-text settings' ranges


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """One pretraining run, with the flag names and defaults of Google's run_pretraining.py.

    Args:
        input_file: str. Pretraining TFRecords, or raw text (see `input_format`);
            comma-separated files or globs.
        output_dir: str. Checkpoints, the backup and results go here.
        bert_config_file: str. The model to train from scratch; with `init_checkpoint`,
            defaults to the `bert_config.json` beside it.
        init_checkpoint: str. A Google checkpoint to continue from (release directory or
            prefix). Defaults to None (random init).
        init_heads: str. With `init_checkpoint`: "checkpoint" loads the pretraining heads
            from it too (strictly), "fresh" starts them new (an encoder-only release).
            Defaults to "checkpoint".
        vocab_file: str. Tokenizes raw text; copied beside the final checkpoint. Defaults to
            the `vocab.txt` beside `init_checkpoint`, else beside `bert_config_file`; a run
            with none fails before training.
        input_format: str. "tfrecord", or raw text: "text" (one sentence per line, blank
            lines between documents) or "wikiextractor". Defaults to "tfrecord".
        pair_task: str. Raw text only: "nsp", "sop" or "none". Defaults to "nsp".
        max_seq_length, max_predictions_per_seq: int. Default to the records' `*_meta.json`
            (TFRecords), or 128 and 20 (raw text).
        masked_lm_prob, short_seq_prob: float. Raw text only. Default to 0.15 and 0.1.
        do_whole_word_mask: bool. Raw text only. Defaults to False.
        do_lower_case: bool. Raw text only. Defaults to True.
        train_batch_size: int. Defaults to 32.
        learning_rate: float. Peak AdamW learning rate. Defaults to 5e-5.
        num_train_steps: int. Defaults to 100000.
        num_warmup_steps: int. Defaults to 10000.
        save_checkpoints_steps: int. Backup and `pretrainer.keras` at most this often
            (an epoch is the largest divisor of `num_train_steps` not above it). Defaults 1000.
        eval_input_file: str. Records to evaluate on after training. Defaults to None.
        max_eval_steps: int. Eval batches. Defaults to 100.
        eval_batch_size: int. Defaults to 8.
        seed: int. Seeds initialization, dropout and the input shuffle. Defaults to 12345.
        jit_compile: bool. XLA-compile the train step (fixed shapes make it pay). Defaults
            to False.
        distribution_strategy: str or `tf.distribute.Strategy`. One of
            `kbert.tasks.distribution.STRATEGIES`. Defaults to "one_device".
        tpu: str. The TPU for distribution_strategy "tpu". Defaults to None.
        mixed_precision: str. "float32", "mixed_float16" or "mixed_bfloat16". Defaults to
            "float32".
        overwrite_output_dir: bool. Start over in an output dir that holds another run or a
            finished one. Defaults to False.
    """

    input_file: str
    output_dir: str
    bert_config_file: str | None = None
    init_checkpoint: str | None = None
    init_heads: str = "checkpoint"
    vocab_file: str | None = None
    input_format: str = TFRECORD
    pair_task: str = "nsp"
    max_seq_length: int | None = ranges.field(None, _DATA_RANGES["max_seq_length"])
    max_predictions_per_seq: int | None = ranges.field(
        None, _DATA_RANGES["max_predictions_per_seq"])
    masked_lm_prob: float = ranges.field(0.15, _DATA_RANGES["masked_lm_prob"])
    short_seq_prob: float = ranges.field(0.1, _DATA_RANGES["short_seq_prob"])
    do_whole_word_mask: bool = False
    do_lower_case: bool = True
    train_batch_size: int = ranges.field(32, ranges.at_least(1))
    learning_rate: float = ranges.field(5e-5, ranges.above(0))
    num_train_steps: int = ranges.field(100000, ranges.at_least(1))
    num_warmup_steps: int = ranges.field(10000, ranges.at_least(0))
    save_checkpoints_steps: int = ranges.field(1000, ranges.at_least(1))
    eval_input_file: str | None = None
    max_eval_steps: int = ranges.field(100, ranges.at_least(1))
    eval_batch_size: int = ranges.field(8, ranges.at_least(1))
    seed: int = ranges.field(12345, ranges.SEED)
    jit_compile: bool = False
    distribution_strategy: object = "one_device"
    tpu: str | None = None
    mixed_precision: str = "float32"
    overwrite_output_dir: bool = False

    def __post_init__(self):
        ranges.check(self)
        distribution.check(self.distribution_strategy, self.mixed_precision)
        if not self.bert_config_file and not self.init_checkpoint:
            raise ValueError("Give bert_config_file (train from scratch) or init_checkpoint")
        if self.input_format not in INPUT_FORMATS:
            raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got "
                             f"{self.input_format!r}")
        if self.pair_task not in pretraining.PAIR_TASKS:
            raise ValueError(f"pair_task must be one of {pretraining.PAIR_TASKS}, got "
                             f"{self.pair_task!r}")
        if self.input_format == TFRECORD and self.pair_task != "nsp":
            raise ValueError(f"pair_task={self.pair_task!r} needs raw text input "
                             "(input_format 'text' or 'wikiextractor'): TFRecords carry "
                             "next-sentence labels")
        if self.init_heads not in BertPretrainer.HEADS:
            raise ValueError(f"init_heads must be one of {BertPretrainer.HEADS}, got "
                             f"{self.init_heads!r}")

    @property
    def text_config(self):
        """The `PretrainingDataConfig` of raw-text input."""
        return pretraining.PretrainingDataConfig(
            max_seq_length=self.max_seq_length or 128,
            max_predictions_per_seq=self.max_predictions_per_seq or 20,
            masked_lm_prob=self.masked_lm_prob, short_seq_prob=self.short_seq_prob,
            do_whole_word_mask=self.do_whole_word_mask)


def resolve_vocab_file(config):
    """The vocab of a run: `vocab_file`, else `vocab.txt` beside the checkpoint or the config.

    Raises:
        FileNotFoundError: none found (the output must be a release directory with a vocab,
            and raw text needs one to tokenize), naming the places looked at.
    """
    if config.vocab_file:
        if not os.path.isfile(config.vocab_file):
            raise FileNotFoundError(f"{config.vocab_file}: vocab_file not found")
        return config.vocab_file
    candidates = []
    if config.init_checkpoint:
        path = config.init_checkpoint
        candidates.append(os.path.join(path if os.path.isdir(path) else os.path.dirname(path),
                                       tf1.VOCAB_FILE))
    if config.bert_config_file:
        candidates.append(os.path.join(os.path.dirname(config.bert_config_file),
                                       tf1.VOCAB_FILE))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        f"no vocab.txt found (looked for {', '.join(candidates)}); pass vocab_file "
        "(--vocab_file): the output is a Google release directory, which holds its vocab")


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

    Reported as `mlm_logits_accuracy` and (with `sentence_head`) `nsp_logits_accuracy`.
    """
    return {name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
            for name in pretraining_losses(sentence_head)}


def compile_pretrainer(model, optimizer, jit_compile=False):
    """Compiles a `BertPretrainer` for `fit` on `kbert.data.pretraining_dataset` batches."""
    with model.distribute_strategy.scope():  # optimizer variables beside the model's
        model.compile(optimizer=optimizer, loss=pretraining_losses(model.sentence_head),
                      weighted_metrics=pretraining_metrics(model.sentence_head),
                      jit_compile=jit_compile)
    return model


def build_pretrainer(config):
    """The model to train and its vocab file: from `init_checkpoint`, or new from the config.

    The second head follows `pair_task` ("none": none). Built in the current strategy scope
    and dtype policy.
    """
    sentence_head = config.pair_task != "none"
    vocab_file = resolve_vocab_file(config)
    if config.init_checkpoint:
        model = BertPretrainer.from_google_checkpoint(
            config.init_checkpoint, config.bert_config_file, heads=config.init_heads,
            sentence_head=sentence_head)
        return model, vocab_file
    bert_config = BertConfig.from_json_file(config.bert_config_file)
    return BertPretrainer(BertEncoder(**bert_config.encoder_kwargs()),
                          sentence_head=sentence_head), vocab_file


def epoch_steps(num_train_steps, save_checkpoints_steps):
    """The largest divisor of `num_train_steps` that is at most `save_checkpoints_steps`."""
    limit = min(save_checkpoints_steps, num_train_steps)
    return max(d for d in range(1, limit + 1) if num_train_steps % d == 0)


def run_pretraining(config):
    """Trains (or resumes), saves the Google checkpoint, evaluates if asked.

    Args:
        config: `PretrainingConfig`.

    Returns:
        dict with "train" (steps, seconds, examples per second, last metrics), "checkpoint"
        (the Google checkpoint prefix) and, with an eval input, "eval".
    """
    resolve_vocab_file(config)  # fail before any work
    check_inputs(config)
    # First: a multi-worker strategy must exist before TensorFlow runs an op.
    strategy = distribution.make_strategy(config.distribution_strategy, config.tpu)
    # Other workers of a multi-worker run write their copies under output_dir/worker_N.
    out = distribution.worker_output_dir(config.output_dir, strategy)
    try:
        # One writer per output dir: a second run into it is refused at once.
        with artifacts.locked(out), distribution.mixed_precision_scope(
                config.mixed_precision), strategy.scope():
            return _run_pretraining(config, strategy, out)
    except tf.errors.DataLossError as e:
        # tf.data does not say which file holds the bad record: find it.
        found = records.find_unreadable([
            path for pattern in (config.input_file, config.eval_input_file)
            if pattern and config.input_format == TFRECORD
            for path in pretraining_input.record_files(pattern)])
        if found is None:
            raise
        raise ValueError(f"{found[0]}: a damaged or cut-short record ({found[1]}) — "
                         "rewrite or remove the file") from e


def check_inputs(config):
    """Checks the input and eval input before any work, naming the file at fault: records
    with the schema and lengths of the run (the first record of each file), or raw text
    that is text (its first 4 KiB)."""
    for pattern in (config.input_file, config.eval_input_file):
        if not pattern:
            continue
        if config.input_format == TFRECORD:
            pretraining_input.check_record_files(pattern, config.max_seq_length,
                                                 config.max_predictions_per_seq)
            continue
        for path in corpus.list_input_files(pattern):
            text_files.check_text(path, f"input_format={config.input_format!r} reads raw "
                                  "text (TFRecords need input_format='tfrecord')")


def _run_pretraining(config, strategy, out):
    keras.utils.set_random_seed(config.seed)
    # The inputs are checked (`check_inputs`): the output dir is claimed, resumed only by the
    # same run, before the model is built (a refused run ends at once). A run that fails
    # after this, before its first backup, is taken over by the next one.
    manifest = manifest_for(config)
    claim = artifacts.claim(
        out, manifest, overwrite_output_dir=config.overwrite_output_dir, owned=_RUN_FILES,
        progress=(BACKUP_DIR,), inputs=[(name, entry["path"]) for name, entry in (
            ("init_checkpoint", manifest["init_checkpoint"]), ("vocab_file",
                                                               manifest["vocab_file"]))
            if entry])
    model, vocab_file = build_pretrainer(config)
    dataset = training_dataset(config, strategy, vocab_file)
    optimizer = optimization.create_optimizer(
        config.learning_rate, config.num_train_steps, config.num_warmup_steps)
    compile_pretrainer(model, optimizer, jit_compile=config.jit_compile)

    steps = epoch_steps(config.num_train_steps, config.save_checkpoints_steps)
    callbacks = [
        backups.Backup(os.path.join(out, BACKUP_DIR)),
        backups.SaveModel(os.path.join(out, MODEL_FILE)),
    ]
    start = time.perf_counter()
    history = model.fit(dataset, epochs=config.num_train_steps // steps, steps_per_epoch=steps,
                        callbacks=callbacks, verbose=2, shuffle=False)  # the records shuffle
    seconds = time.perf_counter() - start
    trained = len(history.epoch) * steps  # this session's steps (after a resume, fewer)
    results = {"train": {
        "global_step": distribution.global_step(model),
        "steps_this_run": trained,
        "seconds": round(seconds, 1),
        "examples_per_second": round(trained * config.train_batch_size / max(seconds, 1e-9), 1),
        # No metrics when a resumed run had no step left (it died writing its outputs).
        **(_named_metrics(model, {k: float(v[-1]) for k, v in history.history.items()})
           if history.epoch else {}),
    }}
    prefix = os.path.join(out, f"model.ckpt-{config.num_train_steps}")
    tf1.save_google_checkpoint(model, prefix, vocab_file=vocab_file)
    results["checkpoint"] = prefix
    logging.info("Google checkpoint written: %s", prefix)
    if config.eval_input_file:
        results["eval"] = evaluate(model, config, vocab_file)
        with io.atomic_write(os.path.join(out, "eval_results.txt")) as f:
            for key in sorted(results["eval"]):
                f.write(f"{key} = {results['eval'][key]}\n")
    io.write_json(os.path.join(out, "train_results.json"), results)
    claim.finish()
    shutil.rmtree(os.path.join(out, BACKUP_DIR), ignore_errors=True)  # only now: see above
    return results


def manifest_for(config):
    """What identifies a pretraining run (`kbert.artifacts.claim`): the settings that change
    what training does, the model's config, and the SHA-256 of checkpoint, vocab and input."""
    settings = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)
                if field.name not in _NOT_IN_MANIFEST}
    settings = {k: v if isinstance(v, (str, int, float, bool, type(None))) else type(v).__name__
                for k, v in settings.items()}
    init = None
    if config.init_checkpoint:
        checkpoint = tf1.GoogleCheckpoint.open(config.init_checkpoint, config.bert_config_file)
        bert_config, init = checkpoint.config, artifacts.fingerprint(checkpoint.prefix + ".index")
    else:
        bert_config = BertConfig.from_json_file(config.bert_config_file)
    files = (pretraining_input.record_files(config.input_file) if config.input_format == TFRECORD
             else corpus.list_input_files(config.input_file))
    return {
        "settings": settings,
        "bert_config": bert_config.to_dict(),
        "init_checkpoint": init,
        "vocab_file": artifacts.fingerprint(resolve_vocab_file(config)),
        "data": {str(i): artifacts.fingerprint(path) for i, path in enumerate(files)},
        "kbert_version": artifacts.kbert_version(),
    }


def training_dataset(config, strategy, vocab_file):
    """The training input: TFRecords sharded by file (TensorFlow's AUTO policy), or raw text,
    one byte range per input pipeline (`distribute_datasets_from_function`)."""
    if config.input_format == TFRECORD:
        return pretraining_input.pretraining_dataset(
            config.input_file, config.train_batch_size, max_seq_length=config.max_seq_length,
            max_predictions_per_seq=config.max_predictions_per_seq, seed=config.seed)

    def dataset_fn(input_context):
        return pretraining_text.pretraining_text_dataset(
            config.input_file, vocab_file,
            input_context.get_per_replica_batch_size(config.train_batch_size),
            config=config.text_config, pair_task=config.pair_task,
            input_format=config.input_format, do_lower_case=config.do_lower_case,
            seed=config.seed, input_context=input_context)

    return strategy.distribute_datasets_from_function(dataset_fn)


def evaluate(model, config, vocab_file=None):
    """Google's eval metric names over `max_eval_steps` batches of the eval input, in order.

    Raw-text eval input is paired and masked with `seed` (the same every run).
    """
    if config.input_format == TFRECORD:
        dataset = pretraining_input.pretraining_dataset(
            config.eval_input_file, config.eval_batch_size,
            max_seq_length=config.max_seq_length,
            max_predictions_per_seq=config.max_predictions_per_seq, shuffle=False, repeat=True)
    else:
        dataset = pretraining_text.pretraining_text_dataset(
            config.eval_input_file, vocab_file or resolve_vocab_file(config),
            config.eval_batch_size, config=config.text_config, pair_task=config.pair_task,
            input_format=config.input_format, do_lower_case=config.do_lower_case,
            seed=config.seed, shuffle_buffer=0)
    metrics = model.evaluate(dataset, steps=config.max_eval_steps, return_dict=True, verbose=0)
    metrics = _named_metrics(model, metrics)
    results = {
        "masked_lm_accuracy": metrics["mlm_logits_accuracy"],
        "masked_lm_loss": metrics["mlm_logits_loss"],
        "loss": metrics["loss"],
        "global_step": distribution.global_step(model),
    }
    if model.sentence_head:
        results["next_sentence_accuracy"] = metrics["nsp_logits_accuracy"]
        results["next_sentence_loss"] = metrics["nsp_logits_loss"]
    return results


def _named_metrics(model, metrics):
    """Metrics under their per-output names, which Keras leaves out for a single output."""
    if model.sentence_head:
        return metrics
    return {"loss": metrics["loss"], "mlm_logits_loss": metrics["loss"],
            "mlm_logits_accuracy": metrics["accuracy"]}


def unigram_accuracy(file_pattern, max_batches=None, **kwargs):
    """Accuracy of always predicting the most frequent masked token: the baseline to beat."""
    counts = collections.Counter()
    dataset = pretraining_input.pretraining_dataset(
        file_pattern, 256, shuffle=False, repeat=False, drop_remainder=False, **kwargs)
    for _, labels, weights in dataset.take(-1 if max_batches is None else max_batches):
        counts.update(labels["mlm_logits"].numpy()[weights["mlm_logits"].numpy() > 0].tolist())
    return max(counts.values()) / sum(counts.values()) if counts else math.nan

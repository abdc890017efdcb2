"""What each run takes: one frozen dataclass per recipe, every option declared once.

    RunConfig         what every training run has (output, start point, vocab, batch size,
                      rate, seed, devices, precision, progress), shared by fine-tuning and
                      pretraining.
    FineTuningConfig  + what every fine-tuning recipe has (steps, epochs, schedule, head).
    GlueConfig        + sentence (pair) classification, regression and multi-label data.
    NerConfig         + tagging data and head.
    SquadConfig       + Google's run_squad.py settings.
    PretrainingConfig + Google's run_pretraining.py settings, and raw-text input.

Each field is a `kbert.options.option` (default, help, range, choices): the tools generate
their flags from these classes, so a flag has the same name, type and help in every tool, and
the ranges checked here are those the flags check when parsed. A recipe changes a default by
re-declaring the field (SQuAD's 384-piece windows). No TensorFlow here: a tool reads these
classes to print its --help.
"""

import dataclasses
import os
import typing

from kbert import artifacts
from kbert import options
from kbert import ranges
from kbert.options import option

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
EMBEDDING_UPDATES = ("dense", "sparse")
NER_FORMATS = ("conll", "two_column")
TAG_SCHEMES = ("auto", "bio", "iob1", "iob2", "bmes", "bioes", "iobes")
TFRECORD = "tfrecord"
INPUT_FORMATS = (TFRECORD, "text", "wikiextractor")  # kbert.data.corpus reads the last two
PAIR_TASKS = ("nsp", "sop", "none")
INIT_HEADS = ("checkpoint", "fresh")


def _check(config):
    ranges.check(config)
    options.check_choices(config)


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What every training run has, fine-tuning or pretraining."""

    # The options a tool must be given (`kbert.cli.config_flags`).
    REQUIRED: typing.ClassVar[tuple[str, ...]] = ("output_dir",)

    output_dir: str = option(None, "The directory to write to; the command's description "
                             "lists what goes there.")
    init_checkpoint: str | None = option(
        None, "The model: a Google checkpoint (release directory, training directory or "
        "prefix) or release name, a Hugging Face or keras-hub directory, or a recipe's output "
        "directory or .keras model.")
    vocab_file: str | None = option(None, "The model's vocab.txt. Defaults to the one beside "
                                    "the model, where the command reads one.")
    bert_config_file: str | None = option(
        None, "Defaults to the bert_config.json beside the checkpoint.")
    do_lower_case: bool = option(
        True, "Whether the model is uncased: lower-case and strip accents before tokenizing.")
    max_seq_length: int | None = option(128, "Word pieces per input or window.",
                                        valid=ranges.at_least(3))  # [CLS] a piece [SEP]
    train_batch_size: int = option(32, "Training batch size (global: split over the "
                                   "replicas).", valid=ranges.at_least(1))
    eval_batch_size: int = option(8, "Evaluation batch size (global).",
                                  valid=ranges.at_least(1))
    learning_rate: float = option(
        5e-5, "Peak AdamW learning rate (linear warm-up, then linear decay to 0). 5e-5 "
        "(Google's) suits BERT-Base and Large (2e-5 to 5e-5); small models (6 layers or "
        "fewer, hidden 384-512, e.g. MiniLM) need 1e-4 to 2e-4: MiniLM-L6 on CoNLL NER "
        "reached dev F1 0.80 at 2e-4 and 0.49 at 5e-5 (BENCHMARKS.md).",
        valid=ranges.Range(0, 1, low_open=True))  # above 1, AdamW's first steps give nan
    seed: int = option(12345, "Seeds the data order and subset, dropout and new weights.",
                       valid=ranges.SEED)
    overwrite_output_dir: bool = option(
        False, "Start over in an output_dir that holds other files, another run or a finished "
        "one.")
    distribution_strategy: object = option(
        "one_device", "one_device: the first GPU, else the CPU. mirrored: every local GPU. "
        "multi_worker_mirrored: several hosts, each running the same command with its own "
        "TF_CONFIG. tpu: a Cloud TPU, see tpu.", choices=STRATEGIES)
    tpu: str | None = option(None, "With distribution_strategy=tpu: the TPU name or grpc:// "
                             "address, 'local' on a TPU VM. Defaults to $TPU_NAME.")
    mixed_precision: str = option(
        "float32", "Compute dtype policy; variables, logits and losses stay float32. "
        "mixed_float16 for GPUs (with loss scaling); mixed_bfloat16 for TPUs, Ampere or "
        "newer GPUs and CPUs with AVX512_BF16 or AMX (elsewhere bfloat16 is emulated, slower "
        "than float32).", choices=PRECISIONS)
    jit_compile: bool = option(
        False, "XLA-compile the train step. It pays with fixed shapes (pretraining); "
        "fine-tuning batches come in many widths and XLA compiles each one.")
    cpu_batch_parts: int = option(
        1, "On the CPU: run each batch as this many row blocks side by side, TensorFlow's "
        "intra-op pool at one thread (the same step: the loss, metrics and update are the whole "
        "batch's; the dropout draws differ). 2 on a 2-core CPU: SST-2 "
        "fine-tuning 1.10-1.14x faster in float32 and bfloat16 on an Intel Sapphire Rapids VM "
        "(AVX-512, AMX; BENCHMARKS.md), not "
        "yet measured on other CPUs. 1: off.", valid=ranges.at_least(1))
    steps_per_execution: int = option(
        1, "Train steps per graph call: the same results, less per-step dispatch; callbacks "
        "see every N steps.", valid=ranges.at_least(1))
    log_every_n_steps: int = option(
        100, "A progress line (step, steps/s, ETA) every this many steps when the output is "
        "not a terminal (a terminal gets a progress bar); 0: epoch lines only.",
        valid=ranges.at_least(0))

    def __post_init__(self):
        if not self.output_dir:
            raise ValueError("output_dir is required")
        _check(self)
        if self.cpu_batch_parts > 1 and self.distribution_strategy != "one_device":
            raise ValueError("cpu_batch_parts splits batches on one CPU (distribution_strategy"
                             f"='one_device'), got {self.distribution_strategy!r}")


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class FineTuningConfig(RunConfig):
    """What every fine-tuning run has; a recipe's config adds its data and head fields."""

    train_file: str | None = option(None, "Training data (with do_train).")
    do_train: bool = option(False, "Fine-tune on the training data.")
    do_eval: bool = option(False, "Score the dev data (after every epoch too, to keep the "
                           "best one).")
    do_predict: bool = option(False, "Predict the test data.")
    allow_casing_mismatch: bool = option(
        False, "Skip the check of do_lower_case against the release name and the vocab.")
    predict_batch_size: int = option(8, "Prediction batch size (global).",
                                     valid=ranges.at_least(1))
    num_train_epochs: float = option(
        3.0, "Passes over the training data (a whole number, except in SQuAD).",
        valid=ranges.above(0))
    max_train_examples: int | None = option(
        None, "Train on a seeded random subset of this many examples (NER: sentences).",
        valid=ranges.at_least(1))
    warmup_proportion: float = option(0.1, "Fraction of the steps of linear warm-up.",
                                      valid=ranges.between(0, 1))
    keep_best_epoch: bool = option(
        True, "With a dev set, score it after every epoch and save the best epoch "
        "(nokeep_best_epoch: the last one).")
    allow_untrained_head: bool = option(
        False, "Evaluate or predict, without do_train, from a Google checkpoint that has no "
        "head for this task (a pretrained release): the head is random, so are the scores.")
    embedding_updates: str = option(
        "dense", "dense: exact AdamW over the whole word table. sparse: update only the rows "
        "a batch used (lazy AdamW: unused rows are not decayed), much less work per step.",
        choices=EMBEDDING_UPDATES)
    head_learning_rate_multiplier: float = option(
        1.0, "The task head (e.g. a CRF's transitions) learns at learning_rate times this.",
        valid=ranges.above(0))
    layerwise_lr_decay: float | None = option(
        None, "ELECTRA's layer-wise decay, e.g. 0.8: transformer layer i of L learns at "
        "decay^(L+1-i) of the rate, the embeddings at decay^(L+2), the head at the full rate.",
        valid=ranges.between(0, 1, low_open=True))

    # Keras `fit` counts whole epochs; a recipe that cuts its own steps may take fractions.
    whole_epochs: typing.ClassVar[bool] = True

    def __post_init__(self):
        super().__post_init__()
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("At least one of do_train, do_eval or do_predict must be set")
        if self.whole_epochs and self.num_train_epochs != int(self.num_train_epochs):
            raise ValueError(f"num_train_epochs must be a whole number (Keras fit counts "
                             f"epochs), got {self.num_train_epochs}")

    def compile_settings(self):
        """The keyword arguments of `kbert.tasks.fine_tuning.compile_model` this config sets."""
        return {name: getattr(self, name) for name in (
            "learning_rate", "warmup_proportion", "jit_compile", "embedding_updates",
            "head_learning_rate_multiplier", "layerwise_lr_decay", "steps_per_execution")}

    def model_path(self):
        """`init_checkpoint`, or `output_dir/model.keras` when not training."""
        if self.init_checkpoint is not None:
            return self.init_checkpoint
        if self.do_train:
            raise ValueError("init_checkpoint is required to train (a Google checkpoint)")
        return os.path.join(self.output_dir, artifacts.MODEL_FILE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _DevAndTestFiles:
    dev_file: str | None = option(None, "Dev data, scored with do_eval.")
    test_file: str | None = option(None, "Test data, predicted with do_predict (and scored "
                                   "when it has labels, where the recipe can).")


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class GlueConfig(FineTuningConfig, _DevAndTestFiles):
    """One classification, regression or multi-label run: a GLUE task or a user's own files
    (.csv or .tsv with a header, or .jsonl)."""

    task_name: str | None = option(None, "GLUE task, e.g. MRPC (with data_dir).")
    data_dir: str | None = option(None, "The task's GLUE directory.")
    text_a_column: str = option("text_a", "Own data: column (JSON key) of the text.")
    text_b_column: str | None = option(None, "Own data: column of the second text of a pair.")
    label_column: str | None = option(
        "label", "Own data: column of the label (multi_label: of the labels, separated by "
        "label_separator).")
    labels: tuple[str, ...] | None = option(
        None, "Own data: the classes in id order. Defaults to the sorted labels of the "
        "training file.")
    regression: bool = option(False, "Own data: labels are real numbers.")
    multi_label: bool = option(
        False, "Own data: each example has any number of the labels (sigmoid head, binary "
        "cross-entropy, a decision threshold per label tuned on dev).")
    label_separator: str = option("|", "multi_label: separates the labels in label_column.")
    label_columns: tuple[str, ...] | None = option(
        None, "multi_label: one 0/1 column per label, instead of label_column.")
    skip_bad_rows: bool = option(False, "Skip (and log) malformed rows of the data files; "
                                 "without it, one stops the run before training.")
    pack_examples: bool = option(
        False, "Train on packed rows: several short examples per row, each seeing only "
        "itself, the same examples per step. Classification on one device.")

    def __post_init__(self):
        super().__post_init__()
        own = [f for f in ("train_file", "dev_file", "test_file") if getattr(self, f)]
        if self.pack_examples and self.distribution_strategy != "one_device":
            raise ValueError("pack_examples trains on one device (distribution_strategy="
                             f"'one_device'), got {self.distribution_strategy!r}")
        if self.multi_label:
            self._check_multi_label(own)
        elif self.label_columns is not None:
            raise ValueError("label_columns is for multi_label data")
        if self.task_name is None:
            if not own:
                raise ValueError("pass task_name and data_dir (a GLUE task), or train_file / "
                                 "dev_file / test_file (own data)")
            _check_steps_have_files(self)
            if self.labels is not None and self.regression:
                raise ValueError("labels and regression exclude each other")
            if self.labels is not None:
                _check_names("labels", self.labels)
                if len(self.labels) < 2 and not self.multi_label:
                    raise ValueError(f"labels: a classifier needs at least 2 classes, got "
                                     f"{list(self.labels)}")
            if self.pack_examples and self.regression:
                raise ValueError("pack_examples is for classification, not regression")
            return
        if own:
            raise ValueError(f"{', '.join(own)}: own data files go without task_name")
        if self.labels is not None or self.regression:
            raise ValueError(f"{'labels' if self.labels is not None else 'regression'} is for "
                             f"own data; task {self.task_name} has its own labels")
        if not self.data_dir:
            raise ValueError(f"task {self.task_name} needs data_dir")
        from kbert.data import glue  # here: reading the options (--help) needs no TensorFlow

        spec = glue.get_task(self.task_name)
        if self.do_train and spec.train_file is None or self.do_eval and not spec.dev_files:
            raise ValueError(f"{spec.name} can only be predicted, with a classifier fine-tuned "
                             f"on MNLI (init_checkpoint=.../{artifacts.MODEL_FILE}, do_predict "
                             "only)")
        if self.pack_examples and spec.num_classes == 1:
            raise ValueError("pack_examples is for classification, not regression")

    def _check_multi_label(self, own):
        if self.task_name is not None or not own:
            raise ValueError("multi_label reads own data (train_file / dev_file / test_file), "
                             "not a GLUE task")
        for other in ("regression", "pack_examples"):
            if getattr(self, other):
                raise ValueError(f"multi_label and {other} exclude each other")
        if self.label_columns is not None and self.label_column not in (None, "label"):
            raise ValueError("pass label_column (labels separated by label_separator) or "
                             "label_columns (one 0/1 column per label), not both")
        if not self.label_separator:
            raise ValueError("label_separator must not be empty")
        if self.label_columns is not None:
            _check_names("label_columns", self.label_columns)


def _check_names(option, names):
    """Refuses a list option `option` of no names, or with an empty or repeated one."""
    if not names:
        raise ValueError(f"{option}: no names — expected comma-separated names")
    names = [str(name) for name in names]
    if any(not name.strip() for name in names):
        raise ValueError(f"{option}: an empty name in {names} — expected comma-separated "
                         "names")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{option}: {', '.join(map(repr, repeated))} given more than once in "
                         f"{names} — each name must be distinct")


def _check_steps_have_files(config):
    """Refuses a step (do_train, do_eval, do_predict) without its file."""
    for step, name in (("do_train", "train_file"), ("do_eval", "dev_file"),
                       ("do_predict", "test_file")):
        if getattr(config, step) and not getattr(config, name):
            raise ValueError(f"{step} needs {name}")


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class NerConfig(FineTuningConfig, _DevAndTestFiles):
    """One NER run: CoNLL or two-column files, a BIO tagger, entity-level F1."""

    data_format: str = option("conll", "conll (word ... label columns, -DOCSTART- lines) or "
                              "two_column (token label).", choices=NER_FORMATS)
    tag_scheme: str = option("auto", "The files' label scheme; all are converted to BIO.",
                             choices=TAG_SCHEMES)
    use_crf: bool = option(False, "A CRF output layer (Viterbi decoding) on a new tagger.")
    document_context: bool = option(
        False, "Fill each window with the neighbouring sentences of the same document "
        "(-DOCSTART- lines split documents); labels, loss and predictions on the target "
        "sentence only. Serving tags single texts, without context.")
    window_stride: int | None = option(
        None, "Sentences longer than a window are split into windows this many pieces apart "
        "(overlapping); each word is predicted from the window where it has the most context. "
        "Unset: consecutive windows, as serving splits long texts.", valid=ranges.at_least(1))
    evaluate_every_epoch: bool = option(
        True, "With a dev file, score it at the end of every training epoch.")

    def __post_init__(self):
        super().__post_init__()
        _check_steps_have_files(self)
        if self.window_stride is not None and self.window_stride > self.max_seq_length - 2:
            raise ValueError(f"window_stride must be in [1, max_seq_length - 2 = "
                             f"{self.max_seq_length - 2}] pieces, got {self.window_stride}")

    def data_files(self):
        """(flag, path) of every file the steps asked for read."""
        dev = self.do_eval or self.do_train and self.evaluate_every_epoch and self.dev_file
        return [(name, getattr(self, name)) for name, wanted in (
            ("train_file", self.do_train), ("dev_file", dev),
            ("test_file", self.do_predict)) if wanted]

    def windows(self):
        """Keyword arguments of `kbert.data.conll.featurize`: how sentences fill windows."""
        return dict(window_stride=self.window_stride, document_context=self.document_context)


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class SquadConfig(FineTuningConfig):
    """One SQuAD run, with Google's run_squad.py settings: `do_train` trains on `train_file`;
    `do_predict` predicts `predict_file` and scores it when it has answers. Without
    `init_checkpoint`, `bert_config_file` starts a model from scratch."""

    whole_epochs = False

    predict_file: str | None = option(None, "SQuAD JSON to predict (and score when it has "
                                      "answers: it is then the dev set).")
    max_seq_length: int = options.same_as(RunConfig, "max_seq_length", default=384)
    doc_stride: int = option(128, "Pieces between the starts of a context's windows.",
                             valid=ranges.at_least(1))
    max_query_length: int = option(64, "Questions are cut to this many pieces.",
                                   valid=ranges.at_least(1))
    max_answer_length: int = option(30, "Longest answer, in pieces.", valid=ranges.at_least(1))
    n_best_size: int = option(20, "Answers kept per question (nbest_predictions.json).",
                              valid=ranges.at_least(1))
    version_2_with_negative: bool = option(False, "SQuAD 2.0: questions may have no answer.")
    null_score_diff_threshold: float = option(
        0.0, "SQuAD 2.0: predict no answer when the null score beats the best span by more.")
    save_checkpoints_steps: int = option(1000, "Most steps between backups.",
                                         valid=ranges.at_least(1))

    def __post_init__(self):
        super().__post_init__()
        if self.do_eval:
            raise ValueError("SQuAD has no do_eval: do_predict scores predict_file when it "
                             "has answers")
        if self.max_seq_length <= self.max_query_length + 3:
            raise ValueError(f"max_seq_length ({self.max_seq_length}) must be greater than "
                             f"max_query_length ({self.max_query_length}) + 3")

    def data_files(self):
        """(flag, path) of every file the steps asked for read."""
        return [(name, getattr(self, name)) for name, wanted in (
            ("train_file", self.do_train), ("predict_file", self.do_predict)) if wanted]

    def model_path(self):
        """`init_checkpoint`; when only predicting, `output_dir/model.keras`; None to train
        a model from scratch (`bert_config_file`)."""
        if self.init_checkpoint is None and self.do_train:
            if not self.bert_config_file:
                raise ValueError("pass init_checkpoint, or bert_config_file for a model from "
                                 "scratch")
            return None
        return super().model_path()


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingConfig(RunConfig):
    """One pretraining run, with the flag names and defaults of Google's run_pretraining.py:
    from scratch (`bert_config_file`) or continuing from `init_checkpoint`, on TFRecords of
    create_pretraining_data or on raw text paired and masked on the fly (`input_file`:
    comma-separated files or globs). `max_seq_length` and `max_predictions_per_seq` default to
    the records' _meta.json; raw text's to 128 and 20."""

    REQUIRED = ("output_dir", "input_file")

    input_file: str = option(None, "The input: a file, or comma-separated files or globs where "
                             "the command takes several; its description gives the format.")
    init_heads: str = option(
        "checkpoint", "With init_checkpoint: checkpoint loads the pretraining heads from it "
        "too, fresh starts them new (an encoder-only release).", choices=INIT_HEADS)
    input_format: str = option(
        TFRECORD, "tfrecord (create_pretraining_data's records, for run_pretraining), or raw "
        "text: text (one sentence per line, blank lines between documents) or wikiextractor.",
        choices=INPUT_FORMATS)
    pair_task: str = option("nsp", "Raw text: next-sentence (nsp), ALBERT's sentence-order "
                            "(sop) or no second task (none).", choices=PAIR_TASKS)
    # [CLS] a [SEP] b [SEP]: at least one piece on each side.
    max_seq_length: int | None = options.same_as(
        RunConfig, "max_seq_length", default=None,
        valid=ranges.between(5, ranges.MAX_SEQ_LENGTH))
    max_predictions_per_seq: int | None = option(
        None, "Masked pieces per sequence.", valid=ranges.between(1, ranges.MAX_SEQ_LENGTH))
    masked_lm_prob: float = option(0.15, "Raw text: share of the pieces to predict.",
                                   valid=ranges.between(0, 1))
    short_seq_prob: float = option(0.1, "Raw text: chance of a shorter target length.",
                                   valid=ranges.between(0, 1))
    do_whole_word_mask: bool = option(False, "Raw text: mask whole words.")
    num_train_steps: int = option(100000, "Training steps.", valid=ranges.at_least(1))
    num_warmup_steps: int = option(10000, "Linear warm-up steps.", valid=ranges.at_least(0))
    save_checkpoints_steps: int = option(1000, "Most steps between backups.",
                                         valid=ranges.at_least(1))
    eval_input_file: str | None = option(None, "Records to evaluate on after training.")
    max_eval_steps: int = option(100, "Evaluation batches.", valid=ranges.at_least(1))

    # The options that only raw text input reads: TFRecords were paired and masked when
    # written, so one of them set otherwise than its default with TFRecords is refused.
    TEXT_ONLY: typing.ClassVar[tuple[str, ...]] = (
        "pair_task", "masked_lm_prob", "short_seq_prob", "do_whole_word_mask")

    def __post_init__(self):
        super().__post_init__()
        from kbert.data.pretraining import instances  # here: --help imports no numpy

        if not self.input_file:
            raise ValueError("input_file is required")
        if not self.bert_config_file and not self.init_checkpoint:
            raise ValueError("Give bert_config_file (train from scratch) or init_checkpoint")
        instances.check_predictions(self.max_seq_length, self.max_predictions_per_seq)
        fields = self.__dataclass_fields__
        text_only = [f"{name}={getattr(self, name)!r}" for name in self.TEXT_ONLY
                     if getattr(self, name) != fields[name].default]
        if self.input_format == TFRECORD and text_only:
            raise ValueError(f"{', '.join(text_only)}: raw text input only (input_format "
                             "'text' or 'wikiextractor'); TFRecords were paired and masked "
                             "by create_pretraining_data, which takes these settings")

    @property
    def text_config(self):
        """The `kbert.data.PretrainingDataConfig` of raw-text input."""
        from kbert.data.pretraining import (
            instances,  # here: reading the options needs no TensorFlow
        )

        return instances.PretrainingDataConfig(
            max_seq_length=self.max_seq_length or 128,
            max_predictions_per_seq=self.max_predictions_per_seq or 20,
            masked_lm_prob=self.masked_lm_prob, short_seq_prob=self.short_seq_prob,
            do_whole_word_mask=self.do_whole_word_mask)

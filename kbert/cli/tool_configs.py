"""What each tool that is not a recipe takes: one frozen dataclass of options per tool.

    CreatePretrainingDataConfig  kbert-create-pretraining-data
    FeatureExtractionConfig      kbert-extract-features
    VocabExpansionConfig         kbert-expand-vocab
    ExportConfig                 kbert-export-saved-model
    ConversionConfig             kbert-convert-checkpoint
    DemoConfig                   kbert-demo

As the recipes' configs (`kbert.tasks.configs`), each field is a `kbert.options.option`, and
a tool generates its flags from its config (`kbert.cli.config_flags`). A setting a recipe
or another tool also takes is that config's option again (`options.same_as`), so a flag
name means the same in every tool (tests/test_options.py). The library functions these
tools call take keyword arguments; these classes are the command lines' only. No TensorFlow
here: the tools read them to print their --help.
"""

import dataclasses
import typing

from kbert import options
from kbert import ranges
from kbert.options import option
from kbert.tasks import configs

# The choices of the libraries behind the tools, which import TensorFlow (--help does not
# need it); the tests check they match (tests/tools/test_commands.py, tests/test_options.py).
MODES = ("replace_unused", "append")  # kbert.vocab_expansion.MODES; the first is the default
INITS = ("mean", "normal", "keep")  # kbert.vocab_expansion.INITS; the first is the default
POOLINGS = ("cls", "mean", "mean_concat_last_four", "mean_second_to_last",
            "mean_sum_last_four", "pooled")  # kbert.tasks.feature_extraction.POOLINGS
FORMATS = ("google", "huggingface", "keras_hub")  # kbert.bridges.FORMATS
SEGMENTERS = ("jieba",)  # kbert.data.word_segmentation.SEGMENTERS
COMPUTE_DTYPES = ("float32", "bfloat16", "float16")  # kbert.export_saved_model's


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ToolConfig:
    """Checks the ranges and choices of the options, as the flags did."""

    # The options a tool must be given (`kbert.cli.config_flags`).
    REQUIRED: typing.ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        ranges.check(self)
        options.check_choices(self)


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatePretrainingDataConfig(_ToolConfig):
    """Raw text to masked-LM / next-sentence TFRecords, with the flag names and defaults of
    Google's create_pretraining_data.py."""

    REQUIRED = ("input_file", "output_file", "vocab_file")

    input_file: str = options.same_as(configs.PretrainingConfig, "input_file")
    output_file: str = option(None, "The file(s) to write; the command's description gives "
                              "the names it takes.")
    vocab_file: str = options.same_as(configs.RunConfig, "vocab_file")
    do_lower_case: bool = options.same_as(configs.RunConfig, "do_lower_case")
    input_format: str = options.same_as(configs.PretrainingConfig, "input_format",
                                        default="text", choices=configs.INPUT_FORMATS[1:])
    max_seq_length: int = options.same_as(configs.PretrainingConfig, "max_seq_length",
                                          default=128)
    max_predictions_per_seq: int = options.same_as(
        configs.PretrainingConfig, "max_predictions_per_seq", default=20)
    masked_lm_prob: float = options.same_as(configs.PretrainingConfig, "masked_lm_prob")
    short_seq_prob: float = options.same_as(configs.PretrainingConfig, "short_seq_prob")
    do_whole_word_mask: bool = options.same_as(configs.PretrainingConfig, "do_whole_word_mask")
    chinese_word_segmenter: str | None = option(
        None, "With do_whole_word_mask: mask the CJK characters of one word of this segmenter "
        "together (needs pip install 'kbert-keras[zh]').", choices=SEGMENTERS)
    dupe_factor: int = option(10, "Passes over the input, with different masks.",
                              valid=ranges.at_least(1))
    random_seed: int = option(12345, "Seeds the pairs, the masks and the shuffle.",
                              valid=ranges.at_least(0))
    num_shards: int | None = option(None, "Shards for a single output_file NAME.",
                                    valid=ranges.at_least(1))
    skip_bad_lines: bool = option(False, "Skip (and log) lines that are not UTF-8 instead of "
                                  "stopping.")
    exact_tokenization: bool = option(
        True, "Exactly Google's FullTokenizer ids. noexact_tokenization uses tf-text's "
        "FastBertTokenizer alone: a little less start-up, other ids on ~0.2% of sentences "
        "(compatibility characters such as '…', '½').")
    chunk_mb: int = option(4, "MiB of text per chunk: random next sentences and the shuffle "
                           "stay within one; memory scales with it.", valid=ranges.at_least(1))


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class FeatureExtractionConfig(_ToolConfig):
    """Per-token features (.jsonl, Google's layout) or pooled sentence vectors (.npy) of a
    text file."""

    REQUIRED = ("input_file", "output_file", "init_checkpoint")

    input_file: str = options.same_as(configs.PretrainingConfig, "input_file")
    output_file: str = options.same_as(CreatePretrainingDataConfig, "output_file")
    init_checkpoint: str = options.same_as(configs.RunConfig, "init_checkpoint")
    bert_config_file: str | None = options.same_as(configs.RunConfig, "bert_config_file")
    vocab_file: str | None = options.same_as(configs.RunConfig, "vocab_file")
    do_lower_case: bool = options.same_as(configs.RunConfig, "do_lower_case")
    layers: tuple[int, ...] = option((-1, -2, -3, -4), "Layer indices of the .jsonl features.")
    pooling: str | None = option(None, "Sentence pooling; required for .npy output.",
                                 choices=POOLINGS)
    max_seq_length: int = options.same_as(configs.RunConfig, "max_seq_length")
    batch_size: int = option(32, "Examples per batch.", valid=ranges.at_least(1))
    overwrite: bool = option(False, "Replace what is already at the output path.")

    def __post_init__(self):
        super().__post_init__()
        if self.sentence_vectors != (self.pooling is not None) or not self.output_file.endswith(
                (".npy", ".jsonl")):
            raise ValueError("output_file must end in .jsonl (per-token features, no pooling) "
                             "or .npy (with pooling)")
        if not self.layers and not self.sentence_vectors:
            raise ValueError("layers is empty: expected the comma-separated layer indices of "
                             "the .jsonl features, e.g. -1,-2")

    @property
    def sentence_vectors(self):
        """Whether the output is one pooled vector per line (.npy)."""
        return self.output_file.endswith(".npy")


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class VocabExpansionConfig(_ToolConfig):
    """New tokens for a Google release: from a file, or the words a corpus misses."""

    REQUIRED = ("input_dir", "output_dir")

    input_dir: str = option(None, "Release directory or checkpoint prefix.")
    output_dir: str = options.same_as(configs.RunConfig, "output_dir")
    new_tokens_file: str | None = option(None, "UTF-8 file, one new token per line.")
    new_tokens_from_corpus: tuple[str, ...] | None = option(
        None, "Corpus files (comma-separated) to choose the new tokens from.")
    corpus_column: str | None = option(None, "Header name of the text column of tab-separated "
                                       "corpus files; unset: one text per line.")
    max_new_tokens: int | None = option(
        None, "With new_tokens_from_corpus: most tokens to add; unset: every candidate that "
        "fits.", valid=ranges.at_least(1))
    mode: str = option(MODES[0], "Fill [unusedN] slots (vocab size unchanged) or append rows.",
                       choices=MODES)
    init: str = option(INITS[0], "New rows: mean of the token's old word pieces, truncated "
                       "normal, or keep the slot's old row.", choices=INITS)
    fallback_to_append: bool = option(False, "With replace_unused, append what finds no free "
                                      "slot.")
    do_lower_case: bool = options.same_as(configs.RunConfig, "do_lower_case")
    overwrite_output_dir: bool = options.same_as(configs.RunConfig, "overwrite_output_dir")

    def __post_init__(self):
        super().__post_init__()
        if bool(self.new_tokens_file) == bool(self.new_tokens_from_corpus):
            raise ValueError("pass one of new_tokens_file or new_tokens_from_corpus")
        if not self.new_tokens_from_corpus and (self.max_new_tokens is not None
                                                or self.corpus_column is not None):
            raise ValueError("max_new_tokens and corpus_column need new_tokens_from_corpus")
        if self.mode == "append" and self.init == "keep":
            raise ValueError("init=keep keeps the old row of a filled [unusedN] slot, and "
                             "mode=append fills none; use init=mean or init=normal")


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportConfig(_ToolConfig):
    """A SavedModel that takes raw text, of a recipe's output, a .keras model or a release."""

    REQUIRED = ("model", "export_dir")
    # What a recipe records in export_settings.json; options given explicitly win over it.
    SETTINGS: typing.ClassVar[tuple[str, ...]] = (
        "do_lower_case", "max_seq_length", "label_names", "text_pair", "max_query_length",
        "max_answer_length", "null_score_diff_threshold")

    model: str = option(
        None, "A recipe's output directory or .keras model, a Google release directory, "
        "training directory or prefix, a release name, or a Hugging Face or keras-hub "
        "directory (the model with its head).")
    export_dir: str = option(None, "The SavedModel directory to write.")
    vocab_file: str | None = options.same_as(configs.RunConfig, "vocab_file")
    overwrite: bool = options.same_as(FeatureExtractionConfig, "overwrite")
    compute_dtype: str = option("float32", "Serving compute dtype (bfloat16: AVX512_BF16/AMX "
                                "CPUs).", choices=COMPUTE_DTYPES)
    do_lower_case: bool = options.same_as(configs.RunConfig, "do_lower_case")
    max_seq_length: int = options.same_as(configs.RunConfig, "max_seq_length")
    label_names: tuple[str, ...] | None = option(
        None, "Class (or tag) names of a classifier or tagger head, in id order. Unset: "
        "export keeps those a recipe recorded, a Hugging Face head gets LABEL_0, LABEL_1, ...")
    text_pair: bool = option(False, "The classifier or encoder takes text pairs.")
    max_query_length: int = options.same_as(configs.SquadConfig, "max_query_length")
    max_answer_length: int = options.same_as(configs.SquadConfig, "max_answer_length")
    null_score_diff_threshold: float = options.same_as(configs.SquadConfig,
                                                       "null_score_diff_threshold")


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class ConversionConfig(_ToolConfig):
    """A model, head included, in another format: Google, Hugging Face or keras-hub."""

    REQUIRED = ("input", "output_dir")
    ALIASES: typing.ClassVar[dict[str, str]] = {"input_dir": "input"}

    input: str = option(None, "The model to read; the command's description lists what it "
                        "may be.")
    output_dir: str = options.same_as(configs.RunConfig, "output_dir")
    to: str = option("google", "Format to write: a Google release directory (bert_model.ckpt, "
                     "bert_config.json, vocab.txt), a Hugging Face directory, or a keras-hub "
                     "preset.", choices=FORMATS)
    label_names: tuple[str, ...] | None = options.same_as(ExportConfig, "label_names")
    exact_gelu: bool = option(
        False, "Keep a Hugging Face input's erf GELU as hidden_act 'gelu_exact' (read by kbert "
        "only). By default it becomes Google's 'gelu', the tanh approximation Google's code "
        "uses.")
    overwrite_output_dir: bool = options.same_as(configs.RunConfig, "overwrite_output_dir")


@options.documented
@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoConfig(_ToolConfig):
    """The demo's release directory and sentences."""

    output_dir: str = options.same_as(configs.RunConfig, "output_dir", default="demo_output")
    sentences: tuple[str, ...] = option(
        ("A man is playing a guitar.", "Someone plays an instrument.",
         "The stock market fell sharply today."), "Comma-separated sentences to encode.")

    def __post_init__(self):
        super().__post_init__()
        if not self.sentences or not all(s.strip() for s in self.sentences):
            raise ValueError(f"sentences {','.join(self.sentences)!r}: expected comma-separated "
                             "sentences, none of them empty")

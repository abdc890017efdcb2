"""Serving signatures under bad requests: one InvalidArgumentError or an answer, never a crash.

Six tiny exports (classifier on pairs, regression, encoder, span labeler, tagger, CRF tagger)
are written once and reloaded; each signature is fed mismatched pairs, wrong ranks, empty
batches, NUL and control characters, invalid UTF-8 and long texts, by hand and by hypothesis.
"""

import re
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from bert import tokenization as google_tokenization
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import kbert
from kbert.export import export_saved_model
from kbert.models.classifier import BertClassifier
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier
from tests import warm_process
from tests.conftest import TINY_CONFIG
from tests.conftest import TINY_VOCAB
from tests.limits import SUBPROCESS_TIMEOUT
from tests.tools.runner import run_tool

# On one worker (setup.cfg), so the six exports are built once.
pytestmark = pytest.mark.xdist_group(__name__)

MAX_SEQ_LENGTH = 12
MAX_POSITIONS = TINY_CONFIG["max_position_embeddings"]
TAGS = ["O", "B", "I"]
EXPORTS = {
    "classifier_pair": (lambda encoder: BertClassifier(encoder, 3),
                        dict(text_pair=True, label_names=["x", "y", "z"])),
    "regression": (lambda encoder: BertClassifier(encoder, 1), {}),
    "encoder": (lambda encoder: encoder, {}),
    "span_labeler": (lambda encoder: BertSpanLabeler(encoder, allow_null=True),
                     dict(max_query_length=4, max_answer_length=3)),
    "tagger": (lambda encoder: BertTokenClassifier(encoder, len(TAGS)),
               dict(label_names=TAGS)),
    "crf_tagger": (lambda encoder: BertTokenClassifier(encoder, len(TAGS), use_crf=True),
                   dict(label_names=TAGS)),
}
# serving_default's inputs, in signature order.
TEXT_INPUTS = {name: ["text"] for name in EXPORTS} | {
    "classifier_pair": ["text_a", "text_b"], "span_labeler": ["question", "context"]}
TAGGERS = ["tagger", "crf_tagger"]
# What the signatures' own checks say; any other InvalidArgumentError came from deeper inside.
OUR_ERRORS = re.compile(
    r"(serving_default|serve_token_ids): .*(must all be|must be below|negative|must be at most)"
    r"|Shape of tensor (text|text_a|text_b|question|context|input_ids|input_mask|segment_ids"
    r"|label_mask) \S+ is not compatible with expected shape")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The six exports, written and loaded once."""
    directory = tmp_path_factory.mktemp("robustness")
    vocab = directory / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    config = kbert.BertConfig(**dict(TINY_CONFIG, num_hidden_layers=1))
    keras.utils.set_random_seed(0)
    exports = Exports(str(vocab))
    for name, (build, options) in EXPORTS.items():
        model = build(kbert.BertEncoder(**config.encoder_kwargs()))
        exports.dirs[name] = export_saved_model(model, directory / name, vocab,
                                                max_seq_length=MAX_SEQ_LENGTH, **options)
        exports.signatures[name] = tf.saved_model.load(exports.dirs[name]).signatures
    return exports


class Exports:
    """The module's SavedModels: their dirs, loaded signatures and vocab file."""

    def __init__(self, vocab):
        self.vocab = vocab
        self.dirs, self.signatures = {}, {}

    def __repr__(self):  # hypothesis prints the arguments of a failing example
        return f"Exports({sorted(self.dirs)})"


@pytest.fixture(scope="module")
def google_tokenizer(exported):
    """Google's `tokenization.FullTokenizer` on the tiny vocab (uncased)."""
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()  # it reads the absl flag `preserve_unused_tokens`
    return google_tokenization.FullTokenizer(exported.vocab, do_lower_case=True)


def serve(exported, name, signature="serving_default", **inputs):
    fn = exported.signatures[name][signature]
    dtype = tf.int32 if signature == "serve_token_ids" else tf.string
    outputs = fn(**{k: tf.constant(v, dtype) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in outputs.items()}


def token_ids(name, batch, seq):
    """Valid inputs of `serve_token_ids`: [CLS] the ... [SEP], all real tokens."""
    ids = np.full((batch, seq), TINY_VOCAB.index("the"), np.int32)
    ids[:, 0], ids[:, -1] = TINY_VOCAB.index("[CLS]"), TINY_VOCAB.index("[SEP]")
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids),
              "segment_ids": np.zeros_like(ids)}
    if name in TAGGERS:
        inputs["label_mask"] = np.ones_like(ids)
    return inputs


def is_ours(error):
    return OUR_ERRORS.search(error.message) is not None


def strings(array):
    """A string array as nested lists of str; raises if any is not valid UTF-8."""
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist()


# --- Shapes --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["classifier_pair", "span_labeler"])
@pytest.mark.parametrize("sizes", [(2, 1), (1, 3), (0, 1)])
def test_unequal_pair_batches_are_one_error(exported, name, sizes):
    first, second = TEXT_INPUTS[name]
    inputs = {first: ["the s"] * sizes[0], second: ["was said"] * sizes[1]}
    expected = (rf"serving_default: {first}, {second} must all be string \[batch\], of one "
                rf"shape; got\] \[{first}\] \[{sizes[0]}\] \[{second}\] \[{sizes[1]}\]")
    with pytest.raises(tf.errors.InvalidArgumentError, match=expected):
        serve(exported, name, **inputs)


def test_unequal_pair_batches_do_not_abort_the_process(exported):
    """The request that aborted the server (std::length_error), in a process of its own."""
    path = exported.dirs["classifier_pair"]
    script = (
        "import tensorflow as tf, tensorflow_text\n"
        f"fn = tf.saved_model.load({path!r}).signatures['serving_default']\n"
        "for _ in range(3):\n"
        "    try:\n"
        "        fn(text_a=tf.constant(['a', 'b']), text_b=tf.constant(['c']))\n"
        "    except tf.errors.InvalidArgumentError as e:\n"
        "        print(e.message)\n")
    result = warm_process.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=SUBPROCESS_TIMEOUT, env=warm_process.environment())
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("text_a, text_b must all be string [batch], of one shape; "
                               "got] [text_a] [2] [text_b] [1]") == 3, result.stdout


@pytest.mark.parametrize("name", EXPORTS)
def test_other_ranks_are_one_error(exported, name):
    names = TEXT_INPUTS[name]
    for bad in ("the s", [["the s"]]):
        for broken in names:
            inputs = {n: bad if n == broken else ["the s"] for n in names}
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=rf"Shape of tensor {broken} \[(1,1)?\] is not compatible "
                                     rf"with expected shape \[\?\]"):
                serve(exported, name, **inputs)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Shape of tensor input_ids \[3\] is not compatible with expected "
                             r"shape \[\?,\?\]"):
        serve(exported, name, "serve_token_ids",
              **{**token_ids(name, 1, 3), "input_ids": [2, 5, 3]})


@pytest.mark.parametrize("name", EXPORTS)
def test_empty_batch(exported, name):
    outputs = serve(exported, name, **{n: [] for n in TEXT_INPUTS[name]})
    assert outputs and all(value.shape[0] == 0 for value in outputs.values())
    outputs = serve(exported, name, "serve_token_ids", **token_ids(name, 0, 4))
    assert outputs and all(value.shape[0] == 0 for value in outputs.values())


@pytest.mark.parametrize("bad, message", [
    (dict(input_mask=np.ones((1, 4), np.int32)),
     r"input_ids, input_mask, segment_ids must all be int32 \[batch, seq\], of one shape; "
     r"got\] \[input_ids\] \[1 5\] \[input_mask\] \[1 4\] \[segment_ids\] \[1 5\]"),
    (dict(input_ids=[[2, 5, 31, 7, 3]]), r"input_ids must be below 31"),
    (dict(input_ids=[[2, 5, -1, 7, 3]]), r"negative input_ids"),
    (dict(segment_ids=[[0, 0, 2, 1, 1]]), r"segment_ids must be below 2"),
])
def test_token_id_errors(exported, bad, message):
    inputs = {**token_ids("classifier_pair", 1, 5), **bad}
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"serve_token_ids: {message}"):
        serve(exported, "classifier_pair", "serve_token_ids", **inputs)


def test_token_ids_longer_than_the_positions(exported):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"seq must be at most {MAX_POSITIONS}, the "
                             rf"max_sequence_length of the model"):
        serve(exported, "crf_tagger", "serve_token_ids",
              **token_ids("crf_tagger", 1, MAX_POSITIONS + 1))


# --- Text: NUL, control characters, invalid UTF-8 ------------------------------------------

def test_nul_and_control_characters_are_cleaned_as_google(exported, google_tokenizer):
    texts = ["the\x00s was said", "the\x01s\x7f was\x0bsaid\u200b", "\x00 the \ufffds,",
             "the\x00", "the s was said"]
    tokens = strings(serve(exported, "encoder", text=texts)["tokens"])
    for text, row in zip(texts, tokens, strict=True):
        expected = ["[CLS]", *google_tokenizer.tokenize(text)[:MAX_SEQ_LENGTH - 2], "[SEP]"]
        assert [t for t in row if t] == expected, text
    # Every word after a NUL is kept and tagged; the word tags as its cleaned self.
    out = serve(exported, "crf_tagger", text=["hello\x00world foo bar", "the\x00s was said",
                                              "thes was said"])
    assert strings(out["words"]) == [["hello\x00world", "foo", "bar"],
                                     ["the\x00s", "was", "said"], ["thes", "was", "said"]]
    assert (out["label_ids"] >= 0).all()
    assert out["label_ids"][1].tolist() == out["label_ids"][2].tolist()


def test_invalid_utf8_is_replaced_as_in_training(exported, google_tokenizer):
    raw = [b"the\xffs was\xc3 said", b"\xe4\xb8x the \xed\xa0\x80,", b"\xc3"]
    decoded = [r.decode("utf-8", "replace") for r in raw]
    out = serve(exported, "tagger", text=raw)
    width = max(len(d.split()) for d in decoded)
    assert strings(out["words"]) == [d.split() + [""] * (width - len(d.split()))
                                     for d in decoded]
    # Tokens as the training path's tokenizer gives them, which are Google's.
    training = kbert.FullTokenizer(exported.vocab)
    tokens = strings(serve(exported, "encoder", text=raw)["tokens"])
    for text, row in zip(raw, tokens, strict=True):
        expected = ["[CLS]", *training.tokenize(text), "[SEP]"]
        assert [t for t in row if t] == expected == [
            "[CLS]", *google_tokenizer.tokenize(text), "[SEP]"], text
    # The answer and its offsets are in the replaced context.
    contexts = [b"\xff\xfethe s was said\xc3 the s", b"the \xe4\xb8 s was"]
    out = serve(exported, "span_labeler", question=["the", "was"], context=contexts)
    for context, answer, start, end in zip(contexts, strings(out["answer"]),
                                           out["answer_start"], out["answer_end"], strict=True):
        assert answer == (context.decode("utf-8", "replace")[start:end] if start >= 0 else "")


# --- Vocab against the model ---------------------------------------------------------------

def test_vocab_of_another_size_is_refused(tiny_google_dir, tmp_path):
    short = tmp_path / "short_vocab.txt"
    short.write_text("".join(t + "\n" for t in TINY_VOCAB[:-1]), encoding="utf-8")
    result = run_tool("export_saved_model.py", f"--model={tiny_google_dir}",
                      f"--vocab_file={short}", f"--export_dir={tmp_path / 'out'}",
                      "--max_seq_length=8")
    assert result.returncode == 2
    # Its first error line (after the INFO lines of reading the checkpoint, as in a terminal).
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors and errors[0].startswith(
        f"error: {short}: 30 tokens, but the model has vocab_size=31 embedding rows"), \
        result.stderr
    assert not (tmp_path / "out").exists()
    long = tmp_path / "long_vocab.txt"
    long.write_text("".join(t + "\n" for t in (*TINY_VOCAB, "extra")), encoding="utf-8")
    with pytest.raises(ValueError, match="32 tokens, but the model has vocab_size=31"):
        export_saved_model(kbert.BertEncoder.from_google_checkpoint(tiny_google_dir),
                           tmp_path / "out", long, max_seq_length=8)


# --- Property: an answer of the request's batch size, or one of our errors -----------------

_PIECES = st.sampled_from(["the", "s", "##s", "said", " ", "\t", "\n", "\x00", "\x01", "\x0b",
                           "\x7f", "\x85", "\ufffd", "\u200b", "\u2028", "\u3000", "中", "😀",
                           "Σ", "é", "[SEP]", "[UNK]", ",", "."])
_TEXTS = st.one_of(
    st.lists(st.one_of(_PIECES, st.text(max_size=4)), max_size=16).map(
        lambda parts: "".join(parts).encode()),
    st.binary(max_size=24),  # mostly invalid UTF-8
    st.builds(lambda piece, n: (piece * n).encode(), _PIECES, st.sampled_from([300, 3000])))


@pytest.mark.parametrize("name", EXPORTS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_text_request(exported, name, data):
    batch = data.draw(st.integers(0, 3), label="batch")
    inputs, valid = {}, True
    for i, input_name in enumerate(TEXT_INPUTS[name]):
        size = data.draw(st.one_of(st.just(batch), st.integers(0, 3)) if i else st.just(batch),
                         label=input_name)
        rank = data.draw(st.sampled_from([1, 1, 1, 1, 1, 0, 2]), label=f"{input_name} rank")
        texts = data.draw(st.lists(_TEXTS, min_size=size, max_size=size))
        inputs[input_name] = {0: texts[0] if texts else b"", 1: texts,
                              2: np.array(texts, object).reshape(-1, 1)}[rank]
        valid &= size == batch and rank == 1
    try:
        out = serve(exported, name, **inputs)
    except tf.errors.InvalidArgumentError as e:
        assert not valid and is_ours(e), e.message
        return
    assert valid
    assert all(value.shape[0] == batch for value in out.values()), {
        k: v.shape for k, v in out.items()}
    for key in ("words", "labels", "tokens", "answer", "label"):
        if key in out:
            strings(out[key])  # valid UTF-8
    decoded = {k: [t.decode("utf-8", "replace") for t in v] for k, v in inputs.items()}
    if name in TAGGERS:
        words = [[w for w in row if w] for row in strings(out["words"])]
        assert words == [t.split() for t in decoded["text"]]
        assert ((out["label_ids"] >= 0) == (out["words"] != b"")).all()
    if name == "span_labeler":
        for context, answer, start, end in zip(decoded["context"], strings(out["answer"]),
                                               out["answer_start"], out["answer_end"],
                                               strict=True):
            assert answer == (context[start:end] if start >= 0 else "")


@pytest.mark.parametrize("name", EXPORTS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_token_ids_request(exported, name, data):
    batch = data.draw(st.integers(0, 3), label="batch")
    seq = data.draw(st.integers(1, MAX_POSITIONS + 2), label="seq")
    inputs = token_ids(name, batch, seq)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    inputs["input_ids"] = rng.integers(0, len(TINY_VOCAB), (batch, seq), dtype=np.int32)
    inputs["input_mask"] = rng.integers(0, 2, (batch, seq), dtype=np.int32)
    fault = data.draw(st.sampled_from([None, None, None, "shape", "id", "segment"]))
    if fault == "shape":
        key = data.draw(st.sampled_from(sorted(inputs)))
        inputs[key] = np.zeros((batch + 1, seq), np.int32)
    elif fault and batch:
        key = "input_ids" if fault == "id" else "segment_ids"
        inputs[key][rng.integers(batch), rng.integers(seq)] = data.draw(
            st.sampled_from([-1, 2**31 - 1, len(TINY_VOCAB) if fault == "id" else 2]))
    valid = seq <= MAX_POSITIONS and (fault is None or (fault != "shape" and not batch))
    try:
        out = serve(exported, name, "serve_token_ids", **inputs)
    except tf.errors.InvalidArgumentError as e:
        assert not valid and is_ours(e), e.message
        return
    assert valid
    assert all(value.shape[0] == batch for value in out.values())

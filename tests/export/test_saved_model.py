"""SavedModel export: reloaded in a fresh process without kbert, equal to the Keras model.

Tiny random models with the real MiniLM vocab (30,522 pieces), so text is tokenized for real.
One subprocess, which cannot import kbert, keras-nlp or keras-hub, runs every signature of
every export; the references are the in-memory Keras models, fed by `BertPreprocessor`, and
packing and best-span search written out here in plain Python.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

import kbert
from kbert.data import conll
from kbert.export import export_saved_model
from kbert.export import serving
from kbert.models.classifier import BertClassifier
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier
from tests import fresh_process
from tests import warm_process
from tests.limits import SUBPROCESS_TIMEOUT

# On one worker (setup.cfg), so the five exports are built and served once.
pytestmark = pytest.mark.xdist_group(__name__)

MAX_SEQ_LENGTH = 24
MAX_QUERY_LENGTH = 6
MAX_ANSWER_LENGTH = 5
LABELS = ["contradiction", "entailment", "neutral"]
NEVER_SPLIT = ["[unused1]"]
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "",
    "Ünïcödé: façade, naïve café — 東京タワー 😀 Straße ﬁne",
    " ".join(["supercalifragilistic"] * 40),  # truncated
    "  tabs\tand\nnewlines [unused1] kept?",
]
TEXTS_B = ["A fox.", "Nothing on the left.", "", "x " * 60, "ça va, ÇA VA"]
QUESTIONS = ["Who jumps?", "", "Where is the café?", "What " + "very " * 20 + "long?", "Wann?"]
CONTEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France.",
    "The Café Zürich is in Genève, next to the Lac Léman. 東京 😀",
    "In 1895 the leader (John Smith) was born; " * 6,  # truncated
    "",
]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
NER_TEXTS = [
    "John  Smith lives in Oslo.",
    "",
    "Koizumi met Jagdeep in Genève . \u200b x",  # a word of only a deleted character
    "Ünïcödé façade, " * 10,  # more pieces than a window: two windows
    "   ",
    "tabs\tand\u00a0nbsp\u3000ideographic 東京",
]

# Runs in a fresh interpreter: TensorFlow and tensorflow-text only, kbert unimportable.
SERVE_SCRIPT = r"""
import json
import sys


class _Forbid:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("kbert", "keras_nlp", "keras_hub"):
            raise ImportError(f"serving imported {name}")


sys.meta_path.insert(0, _Forbid())
for name in sys.argv[3].split(","):  # the test extra's packages (tests/fresh_process.py)
    sys.modules.setdefault(name, None)
sys.path.insert(0, sys.argv[4])  # this checkout, for the network guard alone
from tests import network_guard  # noqa: E402
del sys.path[0]
network_guard.install(network_guard.exit_at)
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tf-text ops)



def decode(x):
    return [decode(y) for y in x] if isinstance(x, list) else x.decode("utf-8")


spec = json.load(open(sys.argv[1], encoding="utf-8"))
results = {"calls": [], "signatures": {}}
models = {}
for call in spec:
    if call["dir"] not in models:
        models[call["dir"]] = tf.saved_model.load(call["dir"])
        results["signatures"][call["dir"]] = {
            name: {"inputs": {k: [v.dtype.name, v.shape.as_list()] for k, v in
                              fn.structured_input_signature[1].items()},
                   "outputs": {k: [v.dtype.name, v.shape.as_list()] for k, v in
                               fn.structured_outputs.items()}}
            for name, fn in models[call["dir"]].signatures.items()}
    fn = models[call["dir"]].signatures[call["signature"]]
    outputs = fn(**{k: tf.constant(v, tf.string if k in ("text", "text_a", "text_b",
                                                         "question", "context") else tf.int32)
                    for k, v in call["inputs"].items()})
    results["calls"].append({
        k: decode(v.numpy().tolist()) if v.dtype == tf.string else v.numpy().tolist()
        for k, v in outputs.items()})
results["modules"] = sorted({m.split(".")[0] for m, module in sys.modules.items() if module})
json.dump(results, open(sys.argv[2], "w", encoding="utf-8"))
__import__("gc").freeze()  # the exit then skips collecting TensorFlow's objects (~1.3 s)
"""


def serve_in_fresh_process(calls, tmp_path):
    """Runs `calls` ({dir, signature, inputs}) in a subprocess; returns its results."""
    spec, out = tmp_path / "calls.json", tmp_path / "results.json"
    spec.write_text(json.dumps(calls), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    hidden = ",".join(fresh_process.hidden_modules())
    result = subprocess.run([sys.executable, "-I", "-c", SERVE_SCRIPT, str(spec), str(out), hidden,
                             fresh_process.ROOT],
                            capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
                            cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


def tiny_model(cls, vocab_size, **kwargs):
    config = kbert.BertConfig(
        vocab_size=vocab_size, hidden_size=12, num_hidden_layers=1, num_attention_heads=3,
        intermediate_size=20, hidden_act="gelu", hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, max_position_embeddings=40, type_vocab_size=2,
        initializer_range=0.5)  # large weights: outputs differ visibly between inputs
    encoder = kbert.BertEncoder(**config.encoder_kwargs())
    return encoder if cls is None else cls(encoder, **kwargs)


def truncate_pair(a, b, max_length):
    """run_classifier.py `_truncate_seq_pair`, written out."""
    a, b = list(a), list(b)
    while len(a) + len(b) > max_length:
        (a if len(a) > len(b) else b).pop()
    return a, b


def pack(rows, pad_id):
    """Lists of (ids, segments) -> padded int32 input_ids, input_mask, segment_ids."""
    width = max(len(ids) for ids, _ in rows)
    ids = np.full((len(rows), width), pad_id, np.int32)
    mask = np.zeros_like(ids)
    segments = np.zeros_like(ids)
    for i, (row_ids, row_segments) in enumerate(rows):
        ids[i, :len(row_ids)], mask[i, :len(row_ids)] = row_ids, 1
        segments[i, :len(row_ids)] = row_segments
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def keras_inputs(google):
    return {"token_ids": google["input_ids"], "segment_ids": google["segment_ids"],
            "padding_mask": google["input_mask"]}


def squad_rows(tokenizer, questions, contexts):
    """run_squad.py's first window: question cut to MAX_QUERY_LENGTH, context to the rest."""
    rows, spans = [], []
    for question, context in zip(questions, contexts, strict=True):
        q = tokenizer.tokenize(question)[:MAX_QUERY_LENGTH]
        pieces = tokenizer.tokenize_with_offsets(context)
        keep = MAX_SEQ_LENGTH - 3 - len(q)
        tokens = ["[CLS]", *q, "[SEP]", *pieces.tokens[:keep], "[SEP]"]
        rows.append((tokenizer.convert_tokens_to_ids(tokens),
                     [0] * (len(q) + 2) + [1] * (len(tokens) - len(q) - 2)))
        spans.append((len(q) + 2, len(tokens) - 1, pieces.begins, pieces.ends))
    return rows, spans


def best_answer(start, end, span, context, with_score=False):
    """Brute force over all spans of the context: the best (text, begin, end) [and score]."""
    first, stop, begins, ends = span
    best, answer = -np.inf, ("", -1, -1)
    for i in range(first, stop):
        for j in range(i, min(stop, i + MAX_ANSWER_LENGTH)):
            score = np.float64(start[i]) + np.float64(end[j])
            if score > best:
                best = score
                b, e = begins[i - first], ends[j - first]
                answer = (context[b:e], b, e)
    return (answer, best) if with_score else answer


@pytest.fixture(scope="module")
def served(minilm_dir, tmp_path_factory):
    """Exports five models, computes the references, and serves them all in one process."""
    tmp_path = tmp_path_factory.mktemp("saved_models")
    vocab = os.path.join(minilm_dir, "vocab.txt")
    keras.utils.set_random_seed(1)
    models = {"encoder": tiny_model(None, 30522),
              "classifier": tiny_model(BertClassifier, 30522, num_classes=3),
              "span_labeler": tiny_model(BertSpanLabeler, 30522),
              "tagger": tiny_model(BertTokenClassifier, 30522, num_labels=len(TAGS)),
              "crf_tagger": tiny_model(BertTokenClassifier, 30522, num_labels=len(TAGS),
                                       use_crf=True)}
    # A large classifier head, so the test texts get different labels.
    head = models["classifier"].output_dense.kernel
    head.assign(np.random.default_rng(0).normal(0, 3, head.shape))
    # Strong transitions, so Viterbi differs from the per-word argmax.
    models["crf_tagger"].crf.transitions.assign(
        np.random.default_rng(0).normal(0, 3, (len(TAGS), len(TAGS))))
    options = {"encoder": dict(do_lower_case=False),
               "classifier": dict(text_pair=True, label_names=LABELS, never_split=NEVER_SPLIT),
               "span_labeler": dict(max_query_length=MAX_QUERY_LENGTH,
                                    max_answer_length=MAX_ANSWER_LENGTH),
               "tagger": dict(label_names=TAGS), "crf_tagger": dict(label_names=TAGS)}
    dirs = {name: export_saved_model(model, tmp_path / name, vocab,
                                     max_seq_length=MAX_SEQ_LENGTH, **options[name])
            for name, model in models.items()}
    cased = kbert.FullTokenizer(vocab, do_lower_case=False)
    uncased = kbert.FullTokenizer(vocab, never_split=NEVER_SPLIT)
    plain = kbert.FullTokenizer(vocab)
    pad_id = plain.vocab["[PAD]"]

    encoder_rows = []
    for text in TEXTS:
        tokens = ["[CLS]", *cased.tokenize(text)[:MAX_SEQ_LENGTH - 2], "[SEP]"]
        encoder_rows.append((cased.convert_tokens_to_ids(tokens), [0] * len(tokens)))
    pair_rows = []
    for a, b in zip(TEXTS, TEXTS_B, strict=True):
        a, b = truncate_pair(uncased.tokenize(a), uncased.tokenize(b), MAX_SEQ_LENGTH - 3)
        tokens = ["[CLS]", *a, "[SEP]"] + ([*b, "[SEP]"] if b else [])
        pair_rows.append((uncased.convert_tokens_to_ids(tokens),
                          [0] * (len(a) + 2) + [1] * (len(tokens) - len(a) - 2)))
    squad, spans = squad_rows(plain, QUESTIONS, CONTEXTS)
    # NER: kbert.data.conll's alignment and windows, decoded and mapped back to words.
    sentences = [conll.Sentence(tuple(t.split()), ("O",) * len(t.split())) for t in NER_TEXTS]
    windows = conll.featurize(sentences, plain, MAX_SEQ_LENGTH)
    google = {"encoder": pack(encoder_rows, pad_id), "classifier": pack(pair_rows, pad_id),
              "span_labeler": pack(squad, pad_id)}
    google["tagger"] = google["crf_tagger"] = {
        "input_ids": windows.features["token_ids"].to_tensor().numpy(),
        "input_mask": windows.features["padding_mask"].to_tensor().numpy(),
        "segment_ids": windows.features["segment_ids"].to_tensor().numpy(),
        "label_mask": windows.label_weights.to_tensor().numpy().astype(np.int32)}
    text_inputs = {"encoder": {"text": TEXTS},
                   "classifier": {"text_a": TEXTS, "text_b": TEXTS_B},
                   "span_labeler": {"question": QUESTIONS, "context": CONTEXTS},
                   "tagger": {"text": NER_TEXTS}, "crf_tagger": {"text": NER_TEXTS}}
    calls, keys = [], []
    for name in models:
        calls.append({"dir": dirs[name], "signature": "serving_default",
                      "inputs": text_inputs[name]})
        calls.append({"dir": dirs[name], "signature": "serve_token_ids",
                      "inputs": {k: v.tolist() for k, v in google[name].items()}})
        keys += [(name, "text"), (name, "token_ids")]
    for i, (a, b) in enumerate(zip(TEXTS, TEXTS_B, strict=True)):  # alone: no padding at all
        calls.append({"dir": dirs["classifier"], "signature": "serving_default",
                      "inputs": {"text_a": [a], "text_b": [b]}})
        keys.append(("classifier", f"single_{i}"))
    for name in ("classifier", "span_labeler", "crf_tagger"):  # an empty batch
        calls.append({"dir": dirs[name], "signature": "serving_default",
                      "inputs": {k: [] for k in text_inputs[name]}})
        keys.append((name, "empty"))
    results = serve_in_fresh_process(calls, tmp_path)
    served = {name: {} for name in models}
    for (name, key), out in zip(keys, results["calls"], strict=True):
        served[name][key] = out
    references = {name: model(keras_inputs(google[name]), training=False)
                  for name, model in models.items()}
    for name in ("tagger", "crf_tagger"):
        ids = np.asarray(models[name].decode(references[name], google[name]["label_mask"]))
        references[name] = {"logits": np.asarray(references[name]), "label_ids": ids,
                            "words": conll.word_labels(windows, ids, TAGS, sentences)}
    return dict(dirs=dirs, models=models, google=google, spans=spans, served=served,
                references=references, results=results, vocab=vocab,
                tokenizers={"encoder": cased, "classifier": uncased, "span_labeler": plain})


def assert_tokens(served, google, tokenizer):
    expected = [[tokenizer.inv_vocab[int(i)] if m else ""
                 for i, m in zip(ids, mask, strict=True)]
                for ids, mask in zip(google["input_ids"], google["input_mask"], strict=True)]
    assert served["tokens"] == expected


def test_fresh_process_serves_without_kbert(served):
    assert not {"kbert", "keras_nlp", "keras_hub"} & set(served["results"]["modules"])
    assert "tensorflow_text" in served["results"]["modules"]


def test_encoder_matches_keras(served):
    reference, google = served["references"]["encoder"], served["google"]["encoder"]
    for out in (served["served"]["encoder"][k] for k in ("text", "token_ids")):
        for name in ("pooled_output", "sequence_output"):
            np.testing.assert_allclose(out[name], reference[name], atol=1e-5)
    # Cased: "Ünïcödé" keeps its accents, and the long text fills every position.
    assert_tokens(served["served"]["encoder"]["text"], google, served["tokenizers"]["encoder"])
    assert google["input_mask"][3].sum() == MAX_SEQ_LENGTH


def test_classifier_matches_keras(served):
    logits = np.asarray(served["references"]["classifier"])
    expected_ids = logits.argmax(axis=1)
    assert len(set(expected_ids.tolist())) > 1  # the inputs are told apart
    for out in (served["served"]["classifier"][k] for k in ("text", "token_ids")):
        np.testing.assert_allclose(out["logits"], logits, atol=1e-5)
        np.testing.assert_allclose(out["probabilities"], tf.nn.softmax(logits), atol=1e-5)
        assert out["label_id"] == expected_ids.tolist()
        assert out["label"] == [LABELS[i] for i in expected_ids]
    for i in range(len(TEXTS)):
        single = served["served"]["classifier"][f"single_{i}"]
        np.testing.assert_allclose(single["logits"][0], logits[i], atol=1e-5)
    text = served["served"]["classifier"]["text"]
    assert_tokens(text, served["google"]["classifier"], served["tokenizers"]["classifier"])
    assert "[unused1]" in text["tokens"][4]  # never_split travels with the export
    assert text["tokens"][2].count("[SEP]") == 1  # empty text_b: no second segment


def test_span_labeler_matches_keras(served):
    reference = served["references"]["span_labeler"]
    for out in (served["served"]["span_labeler"][k] for k in ("text", "token_ids")):
        for name in ("start_logits", "end_logits"):
            np.testing.assert_allclose(out[name], reference[name], atol=1e-5)
    out = served["served"]["span_labeler"]["text"]
    assert_tokens(out, served["google"]["span_labeler"], served["tokenizers"]["span_labeler"])
    start, end = (np.asarray(reference[k]) for k in ("start_logits", "end_logits"))
    expected = [best_answer(start[i], end[i], served["spans"][i], CONTEXTS[i])
                for i in range(len(CONTEXTS))]
    assert list(zip(out["answer"], out["answer_start"], out["answer_end"],
                    strict=True)) == expected
    assert expected[4] == ("", -1, -1)  # empty context: no answer
    assert all(text for text, _, _ in expected[:4])
    assert len(served["google"]["span_labeler"]["input_ids"][3]) == MAX_SEQ_LENGTH


@pytest.mark.parametrize("name", ["tagger", "crf_tagger"])
def test_tagger_matches_keras(served, name):
    reference, google = served["references"][name], served["google"][name]
    text, token_ids = served["served"][name]["text"], served["served"][name]["token_ids"]
    mask = google["label_mask"]
    assert len(mask) == len(NER_TEXTS) + 1  # the long text is two windows
    np.testing.assert_allclose(token_ids["logits"], reference["logits"], atol=1e-5)
    assert token_ids["label_ids"] == np.where(mask > 0, reference["label_ids"], -1).tolist()
    assert token_ids["labels"] == [[TAGS[i] if i >= 0 else "" for i in row]
                                   for row in token_ids["label_ids"]]
    if name == "crf_tagger":  # Viterbi, not the per-word argmax
        assert (reference["label_ids"] != reference["logits"].argmax(-1))[mask > 0].any()
    # Every word of every text gets the label of kbert.data.conll's alignment.
    words = [t.split() for t in NER_TEXTS]
    width = max(map(len, words))
    assert text["words"] == [w + [""] * (width - len(w)) for w in words]
    assert text["labels"] == [w + [""] * (width - len(w)) for w in reference["words"]]
    assert text["label_ids"] == [[TAGS.index(t) if t else -1 for t in row]
                                 for row in text["labels"]]


def test_empty_batch(served):
    for name in ("classifier", "span_labeler", "crf_tagger"):
        outputs = served["served"][name]["empty"]
        assert outputs and all(value == [] for value in outputs.values()), name


def test_signature_names_and_dtypes(served):
    signatures = served["results"]["signatures"]
    strings = ["string", [None]]
    ids = {k: ["int32", [None, None]] for k in ("input_ids", "input_mask", "segment_ids")}
    encoder = signatures[served["dirs"]["encoder"]]
    assert encoder["serving_default"]["inputs"] == {"text": strings}
    assert encoder["serve_token_ids"]["inputs"] == ids
    assert encoder["serving_default"]["outputs"] == {
        "pooled_output": ["float32", [None, 12]], "sequence_output": ["float32", [None, None, 12]],
        "tokens": ["string", [None, None]]}
    classifier = signatures[served["dirs"]["classifier"]]
    assert classifier["serving_default"]["inputs"] == {"text_a": strings, "text_b": strings}
    assert classifier["serve_token_ids"]["outputs"] == {
        "logits": ["float32", [None, 3]], "probabilities": ["float32", [None, 3]],
        "label_id": ["int32", [None]], "label": ["string", [None]]}
    tagger = signatures[served["dirs"]["crf_tagger"]]
    assert tagger["serving_default"]["outputs"] == {
        "words": ["string", [None, None]], "label_ids": ["int32", [None, None]],
        "labels": ["string", [None, None]]}
    assert tagger["serve_token_ids"]["inputs"] == {**ids, "label_mask": ["int32", [None, None]]}
    assert tagger["serve_token_ids"]["outputs"] == {
        "logits": ["float32", [None, None, len(TAGS)]], "label_ids": ["int32", [None, None]],
        "labels": ["string", [None, None]]}
    span = signatures[served["dirs"]["span_labeler"]]
    assert span["serving_default"]["inputs"] == {"question": strings, "context": strings}
    assert span["serving_default"]["outputs"] == {
        "start_logits": ["float32", [None, None]], "end_logits": ["float32", [None, None]],
        "tokens": ["string", [None, None]], "answer": ["string", [None]],
        "answer_start": ["int64", [None]], "answer_end": ["int64", [None]]}


def test_saved_model_cli_lists_signatures(served):
    # TensorFlow's `saved_model_cli` command, whose entry point runs this module's `main`.
    result = warm_process.run(
        [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli", "show", "--dir",
         served["dirs"]["span_labeler"], "--all"], warm_process.environment(),
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert result.returncode == 0, result.stderr[-2000:]
    signatures = {}
    for block in result.stdout.split("signature_def[")[1:]:
        name = block.split("'")[1]
        signatures[name] = {
            line.split("'")[1]: next(x.split(": ")[1] for x in block.split(line, 1)[1]
                                     .splitlines() if "dtype:" in x)
            for line in block.splitlines() if line.strip().startswith(("inputs[", "outputs["))}
    assert signatures["serving_default"] == {
        "question": "DT_STRING", "context": "DT_STRING", "start_logits": "DT_FLOAT",
        "end_logits": "DT_FLOAT", "tokens": "DT_STRING", "answer": "DT_STRING",
        "answer_start": "DT_INT64", "answer_end": "DT_INT64"}
    assert signatures["serve_token_ids"] == {
        "input_ids": "DT_INT32", "input_mask": "DT_INT32", "segment_ids": "DT_INT32",
        "start_logits": "DT_FLOAT", "end_logits": "DT_FLOAT"}


def test_assets_carry_vocab_and_labels(served):
    assets = os.path.join(served["dirs"]["classifier"], "assets")
    assert sorted(os.listdir(assets)) == ["added_tokens.txt", "label_names.txt", "vocab.txt"]
    with open(os.path.join(assets, "label_names.txt"), encoding="utf-8") as f:
        assert f.read().splitlines() == LABELS
    with open(os.path.join(assets, "vocab.txt"), encoding="utf-8") as f, \
            open(served["vocab"], encoding="utf-8") as g:
        assert f.read().splitlines() == [line.strip() for line in g.read().splitlines()]
    assert sorted(os.listdir(os.path.join(served["dirs"]["encoder"], "assets"))) == ["vocab.txt"]


# --- Writing: atomic, no silent overwrite, clear errors ---------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.conftest import TINY_RELEASE_CONFIG
    from tests.conftest import TINY_VOCAB
    directory = tmp_path_factory.mktemp("tiny_vocab")
    vocab = directory / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    keras.utils.set_random_seed(0)
    encoder = kbert.BertEncoder(**kbert.BertConfig(**TINY_RELEASE_CONFIG).encoder_kwargs())
    return encoder, str(vocab)


def test_refuses_non_empty_dir_unless_overwrite(tiny, tmp_path):
    encoder, vocab = tiny
    target = tmp_path / "model"
    target.mkdir()
    (target / "keep.txt").write_text("old")
    with pytest.raises(FileExistsError, match="not empty.*overwrite"):
        export_saved_model(encoder, target, vocab, max_seq_length=8)
    assert os.listdir(target) == ["keep.txt"]
    export_saved_model(encoder, target, vocab, max_seq_length=8, overwrite=True)
    assert {"saved_model.pb", "variables", "assets"} <= set(os.listdir(target))
    assert not (target / "keep.txt").exists()
    assert os.listdir(tmp_path) == ["model"]  # no temporary directories left
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        export_saved_model(encoder, tmp_path / "file", vocab, overwrite=True)


def test_failed_save_leaves_the_old_export(tiny, tmp_path, monkeypatch):
    encoder, vocab = tiny
    target = tmp_path / "model"
    target.mkdir()
    (target / "keep.txt").write_text("old")

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        export_saved_model(encoder, target, vocab, max_seq_length=8, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["model"] and os.listdir(target) == ["keep.txt"]


def test_bad_arguments(tiny, tmp_path):
    encoder, vocab = tiny
    with pytest.raises(TypeError, match="cannot export a BertPretrainer; expected one of"):
        export_saved_model(kbert.BertPretrainer(encoder), tmp_path / "a", vocab)
    with pytest.raises(ValueError, match=r"max_seq_length must be in \[3, 16\]"):
        export_saved_model(encoder, tmp_path / "a", vocab, max_seq_length=17)
    classifier = BertClassifier(encoder, 2)
    with pytest.raises(ValueError, match="3 label_names for 2 classes"):
        export_saved_model(classifier, tmp_path / "a", vocab, max_seq_length=8,
                           label_names=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"label_names\[1\] must be a non-empty one-line"):
        export_saved_model(classifier, tmp_path / "a", vocab, max_seq_length=8,
                           label_names=["a", "b\n"])
    with pytest.raises(ValueError, match="label_names do not apply to a BertEncoder"):
        export_saved_model(encoder, tmp_path / "a", vocab, max_seq_length=8, label_names=["a"])
    with pytest.raises(ValueError, match="max_query_length must be in"):
        export_saved_model(BertSpanLabeler(encoder), tmp_path / "a", vocab, max_seq_length=8,
                           max_query_length=5)
    with pytest.raises(FileNotFoundError, match="missing.txt: vocab file not found"):
        export_saved_model(encoder, tmp_path / "a", tmp_path / "missing.txt", max_seq_length=8)
    assert not os.listdir(tmp_path)


# --- The span search and SQuAD 2.0's null answer, in-process --------------------------------

def test_best_spans_respects_context_order_and_length():
    start = tf.constant([[9.0, 1.0, 5.0, 0.0, 2.0, 0.0], [0.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
    end = tf.constant([[9.0, 4.0, 0.0, 0.0, 3.0, 8.0], [0.0, 2.0, 2.0, 0.0, 0.0, 0.0]])
    in_context = tf.constant([[False, True, True, True, True, False], [False] * 6])
    # Row 0: [CLS] and position 5 are outside the context; (2, 4) = 8 beats (1, 1) = 5 and
    # (2, 1) = 9 is backwards; with 2 pieces at most, (1, 1) = 5 beats (2, 3) = 5 (first).
    start_, end_, found = serving.best_spans(start, end, in_context, 5)
    assert start_.numpy().tolist()[0] == 2 and end_.numpy().tolist()[0] == 4
    assert found.numpy().tolist() == [True, False]
    start_, end_, _ = serving.best_spans(start, end, in_context, 2)
    assert (start_.numpy()[0], end_.numpy()[0]) == (1, 1)


def test_null_answer_threshold(tiny, tmp_path):
    """allow_null: "" where [CLS]'s score beats the best span's by more than the threshold."""
    encoder, vocab = tiny
    tokenizer = kbert.FullTokenizer(vocab)
    model = BertSpanLabeler(kbert.BertEncoder.from_config(encoder.get_config()),
                            allow_null=True)
    model.encoder.set_weights(encoder.get_weights())
    questions = ["he said", "it was", "the", "a"]
    contexts = ["it was the s", "he said that", "as it is", "to the end."]
    rows, spans = squad_rows(tokenizer, questions, contexts)
    logits = model(keras_inputs(pack(rows, tokenizer.vocab["[PAD]"])), training=False)
    start, end = (np.asarray(logits[k]) for k in ("start_logits", "end_logits"))
    best = [best_answer(start[i], end[i], spans[i], contexts[i], with_score=True)
            for i in range(len(contexts))]
    null_odds = [np.float64(start[i, 0]) + np.float64(end[i, 0]) - score
                 for i, (_, score) in enumerate(best)]
    threshold = float(np.mean(sorted(null_odds)[1:3]))  # two answered, two not
    export_dir = export_saved_model(model, tmp_path / "squad2", vocab, max_seq_length=16,
                                    max_query_length=MAX_QUERY_LENGTH,
                                    max_answer_length=MAX_ANSWER_LENGTH,
                                    null_score_diff_threshold=threshold)
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    out = serve(question=tf.constant(questions), context=tf.constant(contexts))
    got = list(zip([a.decode() for a in out["answer"].numpy()],
                   out["answer_start"].numpy().tolist(), out["answer_end"].numpy().tolist(),
                   strict=True))
    expected = [("", -1, -1) if odds > threshold else answer
                for (answer, _), odds in zip(best, null_odds, strict=True)]
    assert got == expected
    assert sum(text == "" for text, _, _ in expected) == 2


def test_the_object_graph_holds_the_variables_not_the_keras_objects(tiny, tmp_path):
    """The SavedModel's object graph is the model's variables, the vocab table and asset and the
    signatures: with the Keras model, preprocessor and packer in it (343 nodes instead of 50
    here), `tf.saved_model.save` walked every layer, and MiniLM's export took twice as long."""
    encoder, vocab = tiny
    export_dir = export_saved_model(encoder, tmp_path / "encoder", vocab, max_seq_length=8)
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    nodes = saved.meta_graphs[0].object_graph_def.nodes
    assert {child.local_name for child in nodes[0].children} == {
        "model_variables", "vocab_file", "vocab_table", "_table_sizes", "signatures"}
    kinds = [node.WhichOneof("kind") for node in nodes]
    assert kinds.count("variable") == len(encoder.variables)
    assert kinds.count("user_object") <= 5  # the module, its list, dict and signature map


def test_regression_head_returns_score(tiny, tmp_path):
    encoder, vocab = tiny
    model = BertClassifier(kbert.BertEncoder.from_config(encoder.get_config()), 1)
    texts = ["he said that it was", "", "the end of the s"]
    export_dir = export_saved_model(model, tmp_path / "stsb", vocab, max_seq_length=8)
    out = tf.saved_model.load(export_dir).signatures["serving_default"](text=tf.constant(texts))
    assert sorted(out) == ["score", "tokens"]
    features = kbert.BertPreprocessor(vocab, max_seq_length=8)(tf.constant(texts))
    np.testing.assert_allclose(out["score"], model(features, training=False)[:, 0], atol=1e-5)


def test_multi_label_classifier_serves_every_label(tiny, tmp_path):
    encoder, vocab = tiny
    model = BertClassifier(kbert.BertEncoder.from_config(encoder.get_config()), 4,
                           multi_label=True)
    model.encoder.set_weights(encoder.get_weights())
    head = model.output_dense.kernel
    head.assign(np.random.default_rng(0).normal(0, 3, head.shape))
    texts = ["he said that it was", "", "the end of the s", "a, to of and in", "it is"]
    features = kbert.BertPreprocessor(vocab, max_seq_length=8)(tf.constant(texts))
    logits = np.asarray(model(features, training=False))
    probabilities = 1 / (1 + np.exp(-logits.astype(np.float64)))
    # Per label, a threshold between its probabilities, so both decisions occur.
    thresholds = np.sort(probabilities, axis=0)[2].round(6).tolist()
    names = ["toxic", "insult", "obscene", "threat"]
    # As tools/export_saved_model.py passes a recipe's export_settings.json.
    settings = {"label_names": names, "thresholds": thresholds, "multi_label": True}
    export_dir = export_saved_model(model, tmp_path / "multi", vocab, max_seq_length=8,
                                    **settings)
    loaded = tf.saved_model.load(export_dir)
    out = loaded.signatures["serving_default"](text=tf.constant(texts))
    assert sorted(out) == ["label_names", "logits", "predicted", "probabilities", "tokens"]
    np.testing.assert_allclose(out["logits"], logits, atol=1e-5)
    np.testing.assert_allclose(out["probabilities"], probabilities, atol=1e-6)
    assert out["probabilities"].dtype == tf.float32 and out["predicted"].dtype == tf.bool
    np.testing.assert_array_equal(out["predicted"],
                                  out["probabilities"].numpy() >= np.float32(thresholds))
    assert 0 < out["predicted"].numpy().sum() < out["predicted"].numpy().size
    assert out["label_names"].numpy().astype(str).tolist() == [names] * len(texts)
    by_ids = loaded.signatures["serve_token_ids"](
        input_ids=features["token_ids"], input_mask=features["padding_mask"],
        segment_ids=features["segment_ids"])
    np.testing.assert_array_equal(by_ids["predicted"], out["predicted"])
    empty = loaded.signatures["serving_default"](text=tf.constant([], tf.string))
    assert empty["label_names"].shape == empty["predicted"].shape == (0, 4)
    # One label is a binary decision (not a regression score); no names, no name output.
    single = BertClassifier(kbert.BertEncoder.from_config(encoder.get_config()), 1,
                            multi_label=True)
    out = tf.saved_model.load(export_saved_model(single, tmp_path / "one", vocab,
                                                 max_seq_length=8)).signatures[
        "serving_default"](text=tf.constant(texts[:2]))
    assert sorted(out) == ["logits", "predicted", "probabilities", "tokens"]
    np.testing.assert_array_equal(out["predicted"], out["probabilities"].numpy() >= 0.5)


def test_multi_label_export_arguments(tiny, tmp_path):
    encoder, vocab = tiny
    multi = BertClassifier(encoder, 2, multi_label=True)
    with pytest.raises(ValueError, match=r"thresholds must be one float per label \(2\)"):
        export_saved_model(multi, tmp_path / "a", vocab, max_seq_length=8, thresholds=[0.5])
    with pytest.raises(ValueError, match=r"thresholds\[1\] must be a probability in \[0, 1\]"):
        export_saved_model(multi, tmp_path / "a", vocab, max_seq_length=8,
                           thresholds=[0.5, 1.5])
    with pytest.raises(ValueError, match="thresholds apply to a multi-label classifier, not a "
                                         r"BertClassifier \(multi_label=False\)"):
        export_saved_model(BertClassifier(encoder, 2), tmp_path / "a", vocab,
                           max_seq_length=8, thresholds=[0.5, 0.5])
    with pytest.raises(ValueError, match="multi_label=False was recorded, but the model's "
                                         "multi_label is True"):
        export_saved_model(multi, tmp_path / "a", vocab, max_seq_length=8, multi_label=False)
    assert not os.listdir(tmp_path)

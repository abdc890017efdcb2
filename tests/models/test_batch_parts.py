"""`BertTask.batch_parts`: each batch run through the model as row blocks side by side, the
loss, metrics and update those of the whole batch."""

import keras
import numpy as np
import pytest

import kbert
from kbert.models.classifier import BertClassifier
from kbert.models.pretrainer import BertPretrainer
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier
from kbert.tasks import pretraining

SEQ = 9


def _inputs(rows, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, SEQ + 1, rows)
    padding_mask = (np.arange(SEQ)[None] < lengths[:, None]).astype("int32")
    return {"token_ids": (rng.integers(4, 31, (rows, SEQ)) * padding_mask).astype("int32"),
            "segment_ids": ((np.arange(SEQ)[None] >= 3) * padding_mask).astype("int32"),
            "padding_mask": padding_mask}


def _classifier(encoder, x, rng):
    rows = len(x["token_ids"])
    return BertClassifier(encoder, 3, dropout=0.0), rng.integers(0, 3, rows), None, {}


def _crf_tagger(encoder, x, rng):
    # The CRF's loss is its negative log-likelihood over the batch's weighted positions,
    # divided by their count: the parts must not each be averaged on their own.
    rows = len(x["token_ids"])
    weights = (rng.random((rows, SEQ)) < 0.6).astype("float32")
    return (BertTokenClassifier(encoder, 4, use_crf=True, dropout=0.0),
            rng.integers(0, 4, (rows, SEQ)).astype("int32"), weights, {})


def _span_labeler(encoder, x, rng):
    rows = len(x["token_ids"])
    return (BertSpanLabeler(encoder),
            {"start_logits": rng.integers(3, 5, rows), "end_logits": rng.integers(4, 6, rows)},
            None, {})


def _pretrainer(encoder, x, rng):
    # Masked-LM loss: summed over the weighted predictions of the batch, divided by their
    # weight (Google's); next-sentence loss: the batch mean.
    rows = len(x["token_ids"])
    x["mask_positions"] = np.sort(rng.choice(np.arange(1, 5), (rows, 3)), axis=1).astype("int32")
    targets = {"mlm_logits": rng.integers(4, 31, (rows, 3)),
               "nsp_logits": rng.integers(0, 2, rows)}
    weights = {"mlm_logits": (rng.random((rows, 3)) < 0.7).astype("float32"),
               "nsp_logits": np.ones(rows, "float32")}
    return BertPretrainer(encoder), targets, weights, dict(
        loss=pretraining.pretraining_losses(),
        weighted_metrics=pretraining.pretraining_metrics())


def _run(head, parts, rows):
    """One step of `fit`, then `evaluate` and `predict`, of a dropout-free tiny `head` with
    `batch_parts=parts`, on one batch of `rows` rows. Returns them and the weights before and
    after the step."""
    keras.utils.set_random_seed(0)
    encoder = kbert.BertEncoder(vocabulary_size=31, num_layers=1, num_heads=3, hidden_dim=12,
                                intermediate_dim=20, max_sequence_length=16, dropout=0.0,
                                attention_dropout=0.0)
    x = _inputs(rows)
    model, targets, weights, compile_kwargs = head(encoder, x, np.random.default_rng(1))
    # SGD: its update is linear in the gradient, so the parts' float round-off stays
    # round-off (Adam's normalised update can turn it into a step of the learning rate).
    model.compile(optimizer=keras.optimizers.SGD(0.1), **compile_kwargs)
    model.batch_parts = parts
    before = model.get_weights()
    history = model.fit(x, targets, sample_weight=weights, batch_size=rows, verbose=0,
                        shuffle=False)
    scores = model.evaluate(x, targets, sample_weight=weights, batch_size=rows, verbose=0,
                            return_dict=True)
    outputs = model.predict(x, batch_size=rows, verbose=0)
    return history.history, scores, outputs, model.get_weights(), before


@pytest.mark.parametrize("head, rows", [
    (_classifier, 5), (_classifier, 1),  # 1 row: the second part is empty
    (_crf_tagger, 5), (_span_labeler, 5), (_pretrainer, 5)])
def test_two_parts_train_evaluate_and_predict_as_one_batch(head, rows):
    whole, split = _run(head, 1, rows), _run(head, 2, rows)
    assert split[0].keys() == whole[0].keys() and split[1].keys() == whole[1].keys()
    for key in whole[0]:
        np.testing.assert_allclose(split[0][key], whole[0][key], rtol=1e-5, err_msg=key)
    for key in whole[1]:
        np.testing.assert_allclose(split[1][key], whole[1][key], rtol=1e-5, err_msg=key)
    keras.tree.map_structure(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), split[2], whole[2])
    for a, b in zip(split[3], whole[3], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # The step moved the weights (a step that did nothing would also be "equal").
    assert any(np.abs(a - b).max() > 1e-4 for a, b in zip(whole[3], whole[4], strict=True))


def test_the_model_sees_each_part_and_the_loss_the_whole_batch(tiny_encoder):
    model = BertClassifier(tiny_encoder, 3)
    model.compile(optimizer="sgd", run_eagerly=True)  # eager steps: the parts' real rows
    model.batch_parts = 3
    rows_seen = []  # by the head's last layer, on the pooled output of the rows it got
    call = model.output_dense.call
    model.output_dense.call = lambda pooled, *args, **kwargs: (
        rows_seen.append(int(pooled.shape[0])) or call(pooled, *args, **kwargs))
    losses = []
    compute_loss = model.compute_loss

    def counting_loss(x=None, y=None, y_pred=None, sample_weight=None, training=True):
        losses.append(int(y_pred.shape[0]))
        return compute_loss(x, y, y_pred, sample_weight, training=training)

    model.compute_loss = counting_loss
    x, y = _inputs(7), np.zeros(7, "int32")
    model.fit(x, y, batch_size=7, verbose=0)
    model.evaluate(x, y, batch_size=7, verbose=0)
    outputs = model.predict(x, batch_size=7, verbose=0)
    assert rows_seen == [3, 2, 2] * 3  # fit, evaluate, predict: 7 rows as 3 + 2 + 2
    assert losses == [7, 7] and outputs.shape == (7, 3)
    rows_seen.clear()
    model(x)  # outside a step: one call, whatever batch_parts says
    assert rows_seen == [7]


def test_no_parts_under_xla_and_setting_it_again_retraces(tiny_encoder):
    model = BertClassifier(tiny_encoder, 3)
    model.compile(optimizer="sgd")
    model.batch_parts = 2
    with model._split_calls():
        assert model._parts_now == 2
    x, y = _inputs(4), np.zeros(4, "int32")
    model.fit(x, y, batch_size=4, verbose=0)
    assert model.train_function is not None
    model.batch_parts = 1  # the step traced for 2 parts is dropped
    assert model.train_function is None
    model.compile(optimizer="sgd", jit_compile=True)
    model.batch_parts = 2
    with model._split_calls():
        assert model._parts_now == 1


@pytest.mark.parametrize("parts", [0, -1, 1.5, True, "2"])
def test_batch_parts_must_be_a_whole_number_of_at_least_one(tiny_encoder, parts):
    model = BertClassifier(tiny_encoder, 3)
    with pytest.raises(ValueError, match=f"batch_parts must be a whole number >= 1, got "
                                         f"{parts!r}"):
        model.batch_parts = parts
    assert model.batch_parts == 1

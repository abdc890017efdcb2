import tensorflow as tf

from kbert.data import features


def test_pretraining_schema_is_googles():
    # bert/run_pretraining.py input_fn_builder `name_to_features` (the subprocess test in
    # test_pretraining_google.py runs Google's own code on kbert's files).
    spec = features.parsing_spec(features.PRETRAINING_FEATURES, max_seq_length=128,
                                 max_predictions_per_seq=20)
    assert spec == {
        "input_ids": tf.io.FixedLenFeature([128], tf.int64),
        "input_mask": tf.io.FixedLenFeature([128], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([128], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([20], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([20], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([20], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def test_to_pretraining_inputs_renames_once():
    batch = {name: tf.fill([2, 1 if name == "next_sentence_labels" else 3], i)
             for i, name in enumerate(features.PRETRAINING_FEATURES)}
    batch["masked_lm_weights"] = tf.cast(batch["masked_lm_weights"], tf.float32)
    inputs, labels, weights = features.to_pretraining_inputs(batch)
    assert sorted(inputs) == ["mask_positions", "padding_mask", "segment_ids", "token_ids"]
    assert inputs["token_ids"] is batch["input_ids"]
    assert inputs["padding_mask"] is batch["input_mask"]
    assert inputs["mask_positions"] is batch["masked_lm_positions"]
    assert labels["mlm_logits"] is batch["masked_lm_ids"]
    assert labels["nsp_logits"].shape == [2]
    assert weights["mlm_logits"] is batch["masked_lm_weights"]
    assert weights["nsp_logits"].numpy().tolist() == [1.0, 1.0]

"""Pretraining data: masked-LM and sentence-pair instances, written to TFRecords or made on the fly.

    instances      documents -> instances: Google's pairing, truncation and 80/10/10 masking
                   (numpy, `rng` passed in); `PretrainingDataConfig`, `PAIR_TASKS`.
    writer         raw text -> sharded TFRecords in Google's schema (create_pretraining_data).
    beam_pipeline  the same shards as an Apache Beam pipeline (the `kbert-keras[beam]` extra).
    record_input   TFRecords -> tf.data batches for `fit` (`pretraining_dataset`).
    text_input     raw text -> tf.data batches, paired and masked anew every epoch.

The package itself imports nothing: the tools read `instances`' config for their --help
without starting TensorFlow.
"""

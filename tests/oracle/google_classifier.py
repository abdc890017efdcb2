"""Test oracle: Google's run_classifier.py `create_model` (`bert-tensorflow` 1.0.4) in-process.

Loaded like `google_squad.py`: the source is executed into a fresh module whose `tf` is
`tensorflow.compat.v1` except for `tf.flags`, which defines run_classifier's flags in a private
`absl.flags.FlagValues`. One more edit to the executed text (site-packages is never modified):
`create_model` reads `output_layer.shape[-1].value`, a TF 1 `Dimension`; TF 2 shapes hold ints,
so `.value` is dropped from that one expression.

API: `run_google_classifier_model(config, prefix, input_ids, input_mask, segment_ids,
num_labels)` returns the logits of `create_model(is_training=False)` restored from `prefix`.
"""

import functools
import importlib.util
import types

import numpy as np
import tensorflow as tf

from tests.oracle import google_bert
from tests.oracle import google_squad

_EDITS = (
    ("import tensorflow.compat.v1 as tf\n", ""),
    ("hidden_size = output_layer.shape[-1].value", "hidden_size = output_layer.shape[-1]"),
)


@functools.cache
def _load():
    google_bert._modeling()
    spec = importlib.util.find_spec("bert.run_classifier")
    with open(spec.origin, encoding="utf-8") as f:
        source = f.read()
    for old, new in _EDITS:
        if source.count(old) != 1:
            raise RuntimeError(f"{spec.origin}: unexpected source; the oracle shim needs updating")
        source = source.replace(old, new)
    private = google_squad._private_flags()
    module = types.ModuleType("google_run_classifier")
    module.__file__ = spec.origin
    module.tf = google_bert._Proxy(tf.compat.v1, flags=private)
    exec(compile(source, spec.origin, "exec"), module.__dict__)  # noqa: S102
    private.FLAGS(["run_classifier"])  # parse: every flag at its default
    return module


def run_google_classifier_model(config, prefix, input_ids, input_mask, segment_ids, num_labels):
    """Google's run_classifier.py `create_model` (is_training=False) restored from `prefix`.

    Args:
        config: dict. The `bert_config.json` content.
        prefix: str. A checkpoint with `bert/*`, `output_weights` and `output_bias`.
        input_ids, input_mask, segment_ids: int arrays [batch, seq].
        num_labels: int.

    Returns:
        float32 [batch, num_labels] logits.
    """
    google = _load()
    modeling = google_bert._modeling()
    graph = tf.Graph()
    with graph.as_default(), tf.device("/device:CPU:0"):
        ids, mask, segments = (tf.constant(np.asarray(x, np.int32))
                               for x in (input_ids, input_mask, segment_ids))
        _, _, logits, _ = google.create_model(
            modeling.BertConfig.from_dict(config), False, ids, mask, segments,
            tf.zeros([ids.shape[0]], tf.int32), num_labels, False)
        saver = tf.compat.v1.train.Saver(var_list=google_bert._graph_variables(graph))
        with tf.compat.v1.Session(graph=graph) as sess:
            saver.restore(sess, prefix)
            return sess.run(logits)

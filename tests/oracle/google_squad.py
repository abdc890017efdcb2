"""Test oracle: Google's run_squad.py (`bert-tensorflow` 1.0.4) in-process, with private flags.

`bert.run_squad` defines ~35 absl flags at import (`bert_config_file`, `vocab_file`,
`do_train`, ...), which collide with `bert.run_pretraining` or any tool imported in the same
pytest process, and its reader and writer read `FLAGS.version_2_with_negative` and
`FLAGS.verbose_logging`. So its source is executed into a fresh module whose `tf` is
`tensorflow.compat.v1` except for `tf.flags`, which defines the flags in a private
`absl.flags.FlagValues` (site-packages is never modified). `bert.modeling` (imported by
run_squad) comes from `google_bert._modeling()`, under that module's tf.contrib shim.

Google's `tokenization.FullTokenizer` reads the global absl flag `preserve_unused_tokens`; the
caller must have called `absl.flags.FLAGS.mark_as_parsed()` (see `google_tokenizer`).

API: `run_squad(version_2_with_negative=False, verbose_logging=False)` returns the module;
`run_google_squad_model(...)` runs its `create_model` from a checkpoint;
`google_tokenizer(vocab_file, do_lower_case=True)`.
"""

import functools
import importlib.util
import types

import numpy as np
import tensorflow as tf
from absl import flags as absl_flags

from tests.oracle import google_bert

_IMPORT_TF = "import tensorflow.compat.v1 as tf\n"


def _private_flags():
    values = absl_flags.FlagValues()
    namespace = types.SimpleNamespace(FLAGS=values)
    for name in ("DEFINE_string", "DEFINE_bool", "DEFINE_integer", "DEFINE_float"):
        setattr(namespace, name, functools.partial(getattr(absl_flags, name), flag_values=values))
    namespace.mark_flag_as_required = functools.partial(absl_flags.mark_flag_as_required,
                                                        flag_values=values)
    return namespace


@functools.cache
def _load():
    google_bert._modeling()
    spec = importlib.util.find_spec("bert.run_squad")
    with open(spec.origin, encoding="utf-8") as f:
        source = f.read()
    if source.count(_IMPORT_TF) != 1:
        raise RuntimeError(f"{spec.origin}: unexpected source; the oracle shim needs updating")
    source = source.replace(_IMPORT_TF, "")
    private = _private_flags()
    module = types.ModuleType("google_run_squad")
    module.__file__ = spec.origin
    module.tf = google_bert._Proxy(tf.compat.v1, flags=private)
    exec(compile(source, spec.origin, "exec"), module.__dict__)  # noqa: S102
    private.FLAGS(["run_squad"])  # parse: every flag at its default
    return module


def run_squad(version_2_with_negative=False, verbose_logging=False):
    """Google's run_squad module with these two flags set."""
    module = _load()
    module.FLAGS.version_2_with_negative = version_2_with_negative
    module.FLAGS.verbose_logging = verbose_logging
    return module


def google_tokenizer(vocab_file, do_lower_case=True):
    """Google's `tokenization.FullTokenizer` (marks the global absl flags parsed)."""
    from bert import tokenization

    if not absl_flags.FLAGS.is_parsed():
        absl_flags.FLAGS.mark_as_parsed()
    return tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)


def run_google_squad_model(config, prefix, input_ids, input_mask, segment_ids):
    """Google's run_squad.py `create_model` (is_training=False) restored from `prefix`.

    Args:
        config: dict. The `bert_config.json` content.
        prefix: str. A checkpoint with `bert/*` and `cls/squad/output_weights`, `output_bias`.
        input_ids, input_mask, segment_ids: int arrays [batch, seq].

    Returns:
        (start_logits, end_logits), float32 [batch, seq] each, unmasked.
    """
    google = _load()
    modeling = google_bert._modeling()
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default(), tf.device("/device:CPU:0"):
        logits = google.create_model(
            modeling.BertConfig.from_dict(config), False,
            *(tf.constant(np.asarray(x, np.int32)) for x in (input_ids, input_mask, segment_ids)),
            False)
        saver = tf1.train.Saver(var_list=google_bert._graph_variables(graph))
        with tf1.Session(graph=graph) as sess:
            saver.restore(sess, prefix)
            return tuple(sess.run(list(logits)))

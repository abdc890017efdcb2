"""Test oracle: Google's original BERT code (`bert-tensorflow` 1.0.4) run under TF 2.21 / Keras 3.

Golden values for kbert's tests come from here: the real `bert.modeling.BertModel` and the real
pretraining heads of `bert.run_pretraining`, built in a private `tf.Graph` and run with a
`tf.compat.v1.Session`, numpy in and numpy out.  Eager mode is never switched off globally, so
this module can be used inside a pytest process that also runs eager TF / Keras 3.

Google's code needs two things that TF 2.21 with Keras 3 no longer provides; a small shim
supplies them (site-packages is never modified):

* ``from tensorflow.contrib import layers as contrib_layers`` (``contrib_layers.layer_norm``):
  a fake ``tensorflow.contrib`` / ``tensorflow.contrib.layers`` pair sits in ``sys.modules``
  only while ``bert.modeling`` is imported; its `layer_norm` is a copy of TF 1.15's
  ``tf.contrib.layers.layer_norm`` (variables ``<scope>/beta`` zeros and ``<scope>/gamma``
  ones, default scope ``LayerNorm``, moments over the normalised axes,
  ``tf.nn.batch_normalization`` with ``variance_epsilon=1e-12``).
* ``tf.layers.dense`` (``tf.compat.v1.layers.dense`` raises "not available with Keras 3"):
  ``bert.modeling.tf`` and ``bert.run_pretraining.tf`` (module globals that point at
  ``tensorflow.compat.v1``) are replaced by a proxy that forwards everything to
  ``tensorflow.compat.v1`` except ``layers.dense``, which is `dense` below: ``<name>/kernel``
  [in, units] and ``<name>/bias`` [units] made with ``get_variable`` under
  ``variable_scope(name, default_name="dense")``, exactly the names TF 1's layer made.

Note that `bert-tensorflow` 1.0.4 is the einsum flavour of Google's `modeling.py`
(``dense_layer_3d`` and friends); its variables and checkpoint layout are those of the original
matmul code (``query/kernel`` is [H, H], ``attention/output/dense/kernel`` is [H, H]).

Everything runs on the CPU in float32 (no TF32 on a GPU machine).

API: `make_google_checkpoint`, `run_google_bert`, `random_inputs`; the shim functions
`layer_norm` and `dense` are public so that they can be tested directly.
"""

import contextlib
import os
import sys
import types
import zlib

import absl.flags
import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

LAYER_NORM_EPSILON = 1e-12  # tf.contrib.layers.layer_norm, for every dtype but float16 (1e-3)
NUM_CLASSIFIER_LABELS = 3

# ---------------------------------------------------------------------------------------------
# The shim.
# ---------------------------------------------------------------------------------------------


def layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None, reuse=None):
    """TF 1.15's `tf.contrib.layers.layer_norm` with center=scale=True and no activation.

    Contrib's own default is ``begin_norm_axis=1``; Google always passes -1 for both axes.
    (Contrib's `model_variable` also put beta/gamma in the MODEL_VARIABLES collection; nothing
    here reads that collection.)
    """
    with tf1.variable_scope(scope, default_name="LayerNorm", values=[inputs], reuse=reuse):
        inputs = tf.convert_to_tensor(inputs)
        shape = inputs.shape
        rank = shape.rank
        if rank is None:
            raise ValueError(f"Inputs {inputs.name} has undefined rank.")
        if begin_norm_axis < 0:
            begin_norm_axis += rank
        if begin_params_axis >= rank or begin_norm_axis >= rank:
            raise ValueError(f"begin axes out of range for rank {rank}")
        params_shape = shape[begin_params_axis:]
        if not params_shape.is_fully_defined():
            raise ValueError(f"Inputs {inputs.name}: shape {params_shape} is not fully defined")
        dtype = inputs.dtype.base_dtype
        beta = tf1.get_variable("beta", shape=params_shape, dtype=dtype,
                                initializer=tf1.zeros_initializer())
        gamma = tf1.get_variable("gamma", shape=params_shape, dtype=dtype,
                                 initializer=tf1.ones_initializer())
        norm_axes = list(range(begin_norm_axis, rank))
        mean, variance = tf1.nn.moments(inputs, norm_axes, keep_dims=True)
        epsilon = LAYER_NORM_EPSILON if dtype != tf.float16 else 1e-3
        outputs = tf1.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                             variance_epsilon=epsilon)
        outputs.set_shape(shape)
        return outputs


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, name=None, reuse=None):
    """TF 1's `tf.layers.dense`: same variable names and shapes, same maths.

    Like TF 1's `Dense.call`: matmul for rank-2 inputs, tensordot on the last axis otherwise,
    then `bias_add` and the activation.  ``kernel_initializer=None`` means `get_variable`'s
    default (glorot uniform), as in TF 1.
    """
    with tf1.variable_scope(name, default_name="dense", values=[inputs], reuse=reuse):
        inputs = tf.convert_to_tensor(inputs)
        rank = inputs.shape.rank
        in_dim = inputs.shape[-1]
        if rank is None or rank < 2 or in_dim is None:
            raise ValueError(f"dense needs rank >= 2 and a known last axis, got {inputs.shape}")
        kernel = tf1.get_variable("kernel", shape=[in_dim, units], dtype=inputs.dtype,
                                  initializer=kernel_initializer)
        if rank == 2:
            outputs = tf.matmul(inputs, kernel)
        else:
            outputs = tf.tensordot(inputs, kernel, [[rank - 1], [0]])
            outputs.set_shape(inputs.shape[:-1].concatenate([units]))
        if use_bias:
            bias = tf1.get_variable("bias", shape=[units], dtype=inputs.dtype,
                                    initializer=bias_initializer or tf1.zeros_initializer())
            outputs = tf.nn.bias_add(outputs, bias)
        if activation is not None:
            outputs = activation(outputs)
        return outputs


class _Proxy:
    """Forwards attribute reads to `target`, except the names given as `overrides`."""

    def __init__(self, target, **overrides):
        self._target = target
        self.__dict__.update(overrides)

    def __getattr__(self, name):  # only reached for names not in overrides
        return getattr(self._target, name)


_CONTRIB_LAYERS = types.ModuleType("tensorflow.contrib.layers")
_CONTRIB_LAYERS.layer_norm = layer_norm
_TF1_FOR_GOOGLE = _Proxy(tf1, layers=_Proxy(tf1.layers, dense=dense))


@contextlib.contextmanager
def _fake_contrib():
    """`tensorflow.contrib.layers` importable, only for the duration of the block."""
    contrib = types.ModuleType("tensorflow.contrib")
    contrib.layers = _CONTRIB_LAYERS
    fakes = {"tensorflow.contrib": contrib, "tensorflow.contrib.layers": _CONTRIB_LAYERS}
    saved = {name: sys.modules.get(name) for name in fakes}
    sys.modules.update(fakes)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _replica_gather_indexes(sequence_tensor, positions):
    # Copy of bert/run_pretraining.py:gather_indexes.
    batch_size, seq_length, width = _modeling().get_shape_list(sequence_tensor, expected_rank=3)
    flat_offsets = tf.reshape(tf.range(0, batch_size, dtype=tf.int32) * seq_length, [-1, 1])
    flat_positions = tf.reshape(positions + flat_offsets, [-1])
    flat_sequence_tensor = tf.reshape(sequence_tensor, [batch_size * seq_length, width])
    return tf.gather(flat_sequence_tensor, flat_positions)


class _ReplicaHeads:
    """The two head builders of `bert/run_pretraining.py`, copied (losses left out).

    Used only when the real module cannot be imported, e.g. because another module in this
    process already defined one of its absl flags (it defines ~20 at import).
    """

    @staticmethod
    def get_masked_lm_output(bert_config, input_tensor, output_weights, positions, label_ids,
                             label_weights):
        modeling = _modeling()
        input_tensor = _replica_gather_indexes(input_tensor, positions)
        with tf1.variable_scope("cls/predictions"):
            with tf1.variable_scope("transform"):
                input_tensor = dense(
                    input_tensor, units=bert_config.hidden_size,
                    activation=modeling.get_activation(bert_config.hidden_act),
                    kernel_initializer=modeling.create_initializer(
                        bert_config.initializer_range))
                input_tensor = modeling.layer_norm(input_tensor)
            output_bias = tf1.get_variable("output_bias", shape=[bert_config.vocab_size],
                                           initializer=tf1.zeros_initializer())
            logits = tf.matmul(input_tensor, output_weights, transpose_b=True)
            logits = tf.nn.bias_add(logits, output_bias)
            log_probs = tf.nn.log_softmax(logits, axis=-1)
        return None, None, log_probs

    @staticmethod
    def get_next_sentence_output(bert_config, input_tensor, labels):
        modeling = _modeling()
        with tf1.variable_scope("cls/seq_relationship"):
            output_weights = tf1.get_variable(
                "output_weights", shape=[2, bert_config.hidden_size],
                initializer=modeling.create_initializer(bert_config.initializer_range))
            output_bias = tf1.get_variable("output_bias", shape=[2],
                                           initializer=tf1.zeros_initializer())
            logits = tf.matmul(input_tensor, output_weights, transpose_b=True)
            logits = tf.nn.bias_add(logits, output_bias)
            log_probs = tf.nn.log_softmax(logits, axis=-1)
        return None, None, log_probs


_LOADED = {}
HEADS_SOURCE = None  # "bert.run_pretraining", or "replica (<why the import failed>)"


def _modeling():
    """`bert.modeling`, imported once with the shim installed."""
    if "modeling" not in _LOADED:
        with _fake_contrib():
            from bert import modeling
        # Also right if someone else imported bert.modeling first with a shim of their own.
        modeling.contrib_layers = _CONTRIB_LAYERS
        modeling.tf = _TF1_FOR_GOOGLE
        _LOADED["modeling"] = modeling
    return _LOADED["modeling"]


def _heads():
    """`bert.run_pretraining` if it imports (once per process), else `_ReplicaHeads`."""
    global HEADS_SOURCE
    if "heads" not in _LOADED:
        _modeling()
        try:
            from bert import run_pretraining
        except Exception as e:  # e.g. absl.flags.DuplicateFlagError
            _LOADED["heads"] = _ReplicaHeads
            HEADS_SOURCE = f"replica ({type(e).__name__}: {e})"
        else:
            # The head builders read no flags; drop the ones the import defined, so that a
            # tool imported later in this process can define its own `max_seq_length` etc.
            flag_values = absl.flags.FLAGS
            for name in list(flag_values):
                if flag_values.find_module_defining_flag(name) == run_pretraining.__name__:
                    delattr(flag_values, name)
            run_pretraining.tf = _TF1_FOR_GOOGLE
            _LOADED["heads"] = run_pretraining
            HEADS_SOURCE = "bert.run_pretraining"
    return _LOADED["heads"]


# ---------------------------------------------------------------------------------------------
# Graph building.
# ---------------------------------------------------------------------------------------------


def _logits_of(log_probs):
    """The `logits` tensor that Google's head fed to `tf.nn.log_softmax`."""
    assert log_probs.op.type == "LogSoftmax", log_probs.op.type
    return log_probs.op.inputs[0]


def _build(config, input_ids, input_mask, token_type_ids, masked_lm_positions, *, mlm, nsp,
           classifier, heads=None):
    """Google's graph in the current default graph; returns the named output tensors."""
    modeling = _modeling()
    bert_config = modeling.BertConfig.from_dict(config)
    input_ids = tf.constant(np.asarray(input_ids, np.int32))
    input_mask = None if input_mask is None else tf.constant(np.asarray(input_mask, np.int32))
    if token_type_ids is not None:
        token_type_ids = tf.constant(np.asarray(token_type_ids, np.int32))
    model = modeling.BertModel(config=bert_config, is_training=False, input_ids=input_ids,
                               input_mask=input_mask, token_type_ids=token_type_ids,
                               use_one_hot_embeddings=False)
    outputs = {
        "embedding_output": model.get_embedding_output(),
        "all_encoder_layers": model.get_all_encoder_layers(),
        "sequence_output": model.get_sequence_output(),
        "pooled_output": model.get_pooled_output(),
    }
    batch = int(input_ids.shape[0])
    heads = heads or _heads()
    if mlm:
        # As run_pretraining.model_fn: the output weights are the (tied) word embeddings.
        positions = tf.constant(np.asarray(masked_lm_positions, np.int32))
        _, _, log_probs = heads.get_masked_lm_output(
            bert_config, model.get_sequence_output(), model.get_embedding_table(), positions,
            tf.zeros_like(positions), tf.ones_like(positions, dtype=tf.float32))
        outputs["mlm_logits"] = tf.reshape(_logits_of(log_probs),
                                           [batch, int(positions.shape[1]), -1])
    if nsp:
        _, _, log_probs = heads.get_next_sentence_output(
            bert_config, model.get_pooled_output(), tf.zeros([batch], tf.int32))
        outputs["nsp_logits"] = _logits_of(log_probs)
    if classifier:
        # As run_classifier.create_model (not imported: its flags clash with run_pretraining's,
        # and it reads `shape[-1].value`, which TF 2 shapes do not have).
        hidden_size = bert_config.hidden_size
        output_weights = tf1.get_variable(
            "output_weights", [NUM_CLASSIFIER_LABELS, hidden_size],
            initializer=tf1.truncated_normal_initializer(stddev=0.02))
        output_bias = tf1.get_variable("output_bias", [NUM_CLASSIFIER_LABELS],
                                       initializer=tf1.zeros_initializer())
        logits = tf.matmul(model.get_pooled_output(), output_weights, transpose_b=True)
        outputs["classifier_logits"] = tf.nn.bias_add(logits, output_bias)
    return outputs


def _add_optimizer_slots():
    """What run_pretraining's `AdamWeightDecayOptimizer` adds: `<var>/adam_m`, `<var>/adam_v`
    (float32, not trainable, one per trainable variable) and the int64 `global_step`."""
    tf1.train.get_or_create_global_step()
    for var in tf1.trainable_variables():
        for slot in ("adam_m", "adam_v"):
            tf1.get_variable(name=f"{var.op.name}/{slot}", shape=var.shape.as_list(),
                             dtype=tf.float32, trainable=False,
                             initializer=tf1.zeros_initializer())


def _random_value(name, shape, dtype, seed):
    """A deterministic random value for variable `name`, independent of the other variables
    (so `bert/*` gets the same values with and without heads for one seed)."""
    rng = np.random.RandomState([seed, zlib.crc32(name.encode())])
    leaf = name.rsplit("/", 1)[-1]
    if dtype.is_integer:  # global_step
        return np.asarray(rng.randint(1, 100_000), dtype.as_numpy_dtype)
    if leaf == "adam_m":
        value = rng.normal(0.0, 0.01, shape)
    elif leaf == "adam_v":
        value = rng.uniform(1e-6, 1e-3, shape)
    elif leaf == "gamma":
        value = 1.0 + rng.normal(0.0, 0.1, shape)
    elif leaf in ("kernel", "output_weights"):
        fan_in = shape[1] if leaf == "output_weights" else shape[0]
        value = rng.normal(0.0, float(np.clip(fan_in ** -0.5, 0.05, 0.2)), shape)
    else:  # embeddings, biases, beta
        value = rng.normal(0.0, 0.1, shape)
    return value.astype(dtype.as_numpy_dtype)


def _graph_variables(graph):
    return {var.op.name: var for var in graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES)}


def _dummy_inputs(config):
    seq = min(2, int(config.get("max_position_embeddings", 512)))
    return np.zeros([1, seq], np.int32), np.ones([1, seq], np.int32), np.zeros([1, seq], np.int32)


# ---------------------------------------------------------------------------------------------
# Public API.
# ---------------------------------------------------------------------------------------------


def make_google_checkpoint(config, prefix, *, with_pretraining_heads, seed=0,
                           with_optimizer_slots=False, with_classifier_head=False):
    """Writes a Google-format BERT checkpoint with random (non-default) values.

    Builds `modeling.BertModel` from `config` (a dict of `bert_config.json` keys), plus the
    MLM and NSP heads as `run_pretraining.py` builds them (`cls/predictions/*`,
    `cls/seq_relationship/*`) if `with_pretraining_heads`, `run_classifier.py`'s
    `output_weights` [3, H] / `output_bias` [3] if `with_classifier_head`, and
    `<var>/adam_m`, `<var>/adam_v`, `global_step` if `with_optimizer_slots`.  Every variable
    gets a random value from `seed` (LayerNorm gamma = 1 + noise; beta, biases non-zero).
    Saved with `tf.compat.v1.train.Saver` to `prefix` (`prefix.index`, `prefix.data-*`, a
    `checkpoint` file; no `.meta`), and `bert_config.json` is written next to it.
    """
    prefix = os.fspath(prefix)
    directory = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(directory, exist_ok=True)
    modeling = _modeling()
    graph = tf.Graph()
    with graph.as_default(), tf.device("/device:CPU:0"):
        input_ids, input_mask, token_type_ids = _dummy_inputs(config)
        _build(config, input_ids, input_mask, token_type_ids,
               np.zeros([1, 1], np.int32), mlm=with_pretraining_heads,
               nsp=with_pretraining_heads, classifier=with_classifier_head)
        if with_optimizer_slots:
            _add_optimizer_slots()
        variables = _graph_variables(graph)
        feeds, assigns = {}, []
        for name, var in sorted(variables.items()):
            dtype = var.dtype.base_dtype
            placeholder = tf1.placeholder(dtype, var.shape)
            assigns.append(tf1.assign(var, placeholder))
            feeds[placeholder] = _random_value(name, var.shape.as_list(), dtype, seed)
        saver = tf1.train.Saver(var_list=variables)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(assigns, feed_dict=feeds)
            saver.save(sess, prefix, write_meta_graph=False)
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        f.write(modeling.BertConfig.from_dict(config).to_json_string())


def _check_checkpoint(variables, prefix):
    """Raises unless the checkpoint has every graph variable, with the same shape."""
    in_checkpoint = dict(tf.train.list_variables(os.fspath(prefix)))
    missing = sorted(set(variables) - set(in_checkpoint))
    wrong_shape = sorted(
        f"{name}: graph {var.shape.as_list()} vs checkpoint {in_checkpoint[name]}"
        for name, var in variables.items()
        if name in in_checkpoint and var.shape.as_list() != list(in_checkpoint[name]))
    if missing or wrong_shape:
        raise ValueError(f"Checkpoint {prefix} does not fit Google's graph. Missing: {missing}. "
                         f"Wrong shape: {wrong_shape}")


def run_google_bert(config, prefix, input_ids, input_mask, token_type_ids,
                    masked_lm_positions=None):
    """Runs Google's BertModel (is_training=False) restored from checkpoint `prefix`.

    Returns numpy float32 arrays: `embedding_output` [B, S, H], `all_encoder_layers` (a list
    of [B, S, H]), `sequence_output` [B, S, H], `pooled_output` [B, H]; and, when
    `masked_lm_positions` [B, P] is given, `mlm_logits` [B, P, V] (before log_softmax) if the
    checkpoint has `cls/predictions/*` and `nsp_logits` [B, 2] if it has
    `cls/seq_relationship/*`.  Only the graph's variables are restored (extra checkpoint
    entries such as Adam slots are ignored); a missing one, or one of another shape, raises.
    `input_mask` / `token_type_ids` may be None (Google's defaults: all ones / all zeros).
    """
    in_checkpoint = {name for name, _ in tf.train.list_variables(os.fspath(prefix))}
    want_heads = masked_lm_positions is not None
    graph = tf.Graph()
    with graph.as_default(), tf.device("/device:CPU:0"):
        outputs = _build(
            config, input_ids, input_mask, token_type_ids, masked_lm_positions,
            mlm=want_heads and any(n.startswith("cls/predictions/") for n in in_checkpoint),
            nsp=want_heads and any(n.startswith("cls/seq_relationship/") for n in in_checkpoint),
            classifier=False)
        variables = _graph_variables(graph)
        _check_checkpoint(variables, prefix)
        saver = tf1.train.Saver(var_list=variables)
        with tf1.Session(graph=graph) as sess:
            saver.restore(sess, os.fspath(prefix))
            return sess.run(outputs)


def random_inputs(config, batch=2, seq=7, seed=0, num_masked=3):
    """A padded batch of two-segment inputs, as keyword arguments for `run_google_bert`.

    Even rows are full length, odd rows (the second one first) end in `max(1, seq // 3)`
    padding positions.  Token ids are in [1, vocab_size) on real tokens and 0 on padding;
    token types are 0 for the first half of the real tokens and 1 for the rest (all 0 if
    type_vocab_size < 2); `masked_lm_positions` [B, num_masked] are sorted positions of real
    tokens other than position 0 (distinct when the row is long enough).
    """
    rng = np.random.RandomState(seed)
    lengths = np.full([batch], seq)
    lengths[1::2] = max(1, seq - max(1, seq // 3))
    positions = np.arange(seq)[None, :]
    input_mask = (positions < lengths[:, None]).astype(np.int32)
    input_ids = rng.randint(1, config["vocab_size"], (batch, seq)).astype(np.int32) * input_mask
    token_type_ids = (positions >= (lengths[:, None] + 1) // 2).astype(np.int32) * input_mask
    if config.get("type_vocab_size", 16) < 2:
        token_type_ids[:] = 0
    masked_lm_positions = np.zeros([batch, num_masked], np.int32)
    for row, length in enumerate(lengths):
        if length > 1:
            choices = np.arange(1, length)
            picked = rng.choice(choices, num_masked, replace=len(choices) < num_masked)
            masked_lm_positions[row] = np.sort(picked)
    return {"input_ids": input_ids, "input_mask": input_mask, "token_type_ids": token_type_ids,
            "masked_lm_positions": masked_lm_positions}

"""End-to-end GLUE fine-tuning: kbert's recipe vs the Hugging Face Trainer and keras-hub.

For each task, runs as separate processes, one after the other, on the same real MiniLM
weights (converted once to a Google checkpoint for kbert, read from the Hugging Face directory
by both peers), with the same seeded training subset, epochs, batch size, learning rate,
warm-up, weight decay, sequence length and precision (`bench.budget`: --precision=bfloat16 is
kbert's --mixed_precision=mixed_bfloat16, the Trainer's bf16 autocast, keras-hub's
mixed_bfloat16 policy):
  kbert        `tools/run_classifier.py` (length-grouped batches padded to their longest
               example), plus any --kbert_flags
  huggingface  `bench/hf_peer.py`: `transformers.Trainer` on PyTorch, dynamic padding and
               length grouping on (what a user would pick instead)
  keras_hub    `bench/glue_peer.py`: keras-hub's default preprocessing, every batch padded to
               --max_seq_length
Prints one row per task: dev metrics and training examples/s of each, and kbert's ratio to each
peer (Hugging Face first), over the whole `fit` (kbert's includes writing its per-epoch
checkpoint and backup) and over the epochs alone (training only, timed the same way on every
side), with the precision each side ran in; a table of the epochs' speeds follows. Also the
compute bound of issue 28: the training step costs 2 x 3 x (non-embedding weights) FLOP per
real token, so at the fp32 matmul peak P the bound is P / (6 * weights * mean tokens per
example) examples/s; the row gives kbert's fraction of it (of the fp32 peak whatever
--precision is).

With --seeds, every task runs once per seed (kbert, then each peer, seed by seed), and a last
table gives per task and peer each seed's ratio, the ratio of the mean speeds, the least ratio
and the mean dev scores: what issue 49's "3 seeds" rows quote.

  python -m bench.finetune --tasks=SST-2:64:1:8000,MRPC:128:3:0 --work_dir=/tmp/kbert_finetune
  python -m bench.finetune --tasks=SST-2:64:1:8000 --peers=huggingface --seeds=1,2,3 \
      --precision=bfloat16 --kbert_flags=--embedding_updates=sparse,--cpu_batch_parts=2
"""

import json
import os
import time

from absl import app
from absl import flags

from bench import budget
from bench import runs

_TASKS = flags.DEFINE_list(
    "tasks", ["SST-2:64:1:8000", "MRPC:128:1:0"],
    "TASK:MAX_SEQ_LENGTH:EPOCHS:MAX_TRAIN_EXAMPLES (0 = the whole train set).")
_GLUE = flags.DEFINE_string("glue_dir", os.path.join(runs.SHARED_DATA, "glue"),
                            "Directory with one GLUE directory per task.")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_finetune", "Scratch directory.")
_BUDGET = budget.define_budget_flags(train_batch_size=32, eval_batch_size=32,
                                     learning_rate=1e-4, seed=12345)
_SEEDS = budget.define_seeds_flag(
    [], "Run every task once per seed, e.g. 1,2,3 (instead of --seed), and print the ratios "
    "seed by seed.")
_OUTPUT = flags.DEFINE_string("output", None, "Write the rows as JSON here.")
_KBERT_FLAGS = budget.define_kbert_flags("run_classifier.py", "--jit_compile=false")
_PEAK = flags.DEFINE_float(
    "peak_gflops", 0.0, "fp32 matmul peak for the compute bound, GFLOP/s; 0 measures it.")

PEER_SCRIPTS = {"huggingface": "bench.hf_peer", "keras_hub": "bench.glue_peer"}
_PEERS = flags.DEFINE_list("peers", ["huggingface", "keras_hub"],
                           "Peers to run: huggingface, keras_hub.")
runs.validate_peers(_PEERS, PEER_SCRIPTS)


def matmul_peak_gflops(size=1536, repeats=20):
    """This machine's fp32 matmul rate, GFLOP/s: the best of `repeats` [size, size] products."""
    import tensorflow as tf

    a = tf.random.normal([size, size])
    product = tf.function(lambda a: tf.reduce_sum(tf.matmul(a, a)))
    product(a).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product(a).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best / 1e9


def non_embedding_weights(config_path):
    """Weights a token's forward pass multiplies by: per layer the four attention
    projections and the two feed-forward ones (biases, LayerNorms and the pooler are small)."""
    config = runs.read_json(config_path)
    hidden, intermediate = config["hidden_size"], config["intermediate_size"]
    return config["num_hidden_layers"] * (4 * hidden * hidden + 2 * hidden * intermediate)


def run_task(item, seed, checkpoint, peak, weights):
    """One row: `item` (TASK:SEQ:EPOCHS:MAX_TRAIN) trained by kbert, then by each peer."""
    task, seq, epochs, max_train = item.split(":")
    data_dir = os.path.join(_GLUE.value, task)
    common = [f"--task_name={task}", f"--data_dir={data_dir}", f"--max_seq_length={seq}",
              f"--num_train_epochs={epochs}"]
    if int(max_train):
        common.append(f"--max_train_examples={max_train}")
    kbert_dir = os.path.join(_WORK.value, f"kbert_{task}")
    runs.run(["tools/run_classifier.py", *common, *_budget_arguments(seed, kbert=True),
              f"--init_checkpoint={checkpoint}", f"--output_dir={kbert_dir}", "--do_train",
              "--do_eval",
              # As the peers: the last epoch, no dev scoring between epochs; a re-run
              # starts over.
              "--nokeep_best_epoch", "--overwrite_output_dir", *_KBERT_FLAGS.value])
    kbert_train = runs.read_json(os.path.join(kbert_dir, "train_results.json"))
    kbert_eval = runs.read_json(os.path.join(kbert_dir, "eval_results.json"))
    # Training alone: the epochs' time, as every side times it (kbert's timer runs before
    # its checkpoint and backup callbacks, which the peers do not have).
    examples = kbert_train["examples"] * float(epochs)
    row = {"task": task, "seed": seed, "max_seq_length": int(seq), "epochs": float(epochs),
           "precision": _BUDGET.precision.value,
           "kbert_precision": runs.kbert_precision(kbert_dir),
           "train_examples": kbert_train["examples"],
           "kbert_dev": {k: v for k, v in kbert_eval.items() if k.startswith("dev")}}
    runs.add_speeds(row, "kbert", examples, kbert_train)
    tokens = kbert_train["mean_tokens_per_example"]
    row["compute_bound_examples_per_second"] = round(peak * 1e9 / (6 * weights * tokens), 1)
    row["fraction_of_bound"] = round(
        row["kbert_epoch_examples_per_second"] / row["compute_bound_examples_per_second"], 3)
    for peer in _PEERS.value:
        result = runs.run_peer(row, peer,
                               [PEER_SCRIPTS[peer], *common, *_budget_arguments(seed)],
                               os.path.join(_WORK.value, f"{peer}_{task}.json"))
        row[f"{peer}_dev"] = result["eval"]
        runs.add_speeds(row, peer, examples, result["train"])
    print(json.dumps(row), flush=True)
    return row


def _budget_arguments(seed, kbert=False):
    return [arg for arg in budget.arguments(_BUDGET, kbert=kbert)
            if not arg.startswith("--seed=")] + [f"--seed={seed}"]


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    seeds = [int(seed) for seed in _SEEDS.value] or [_BUDGET.seed.value]
    checkpoint = runs.google_checkpoint(_WORK.value)
    peak = _PEAK.value or matmul_peak_gflops()
    weights = non_embedding_weights(os.path.join(checkpoint, "bert_config.json"))
    print(f"fp32 matmul peak {peak:.0f} GFLOP/s; {weights / 1e6:.1f} M non-embedding weights",
          flush=True)
    rows = [run_task(item, seed, checkpoint, peak, weights)
            for item in _TASKS.value for seed in seeds]
    print(runs.precision_table(rows, ["kbert", *_PEERS.value], "examples/s over the epochs"),
          flush=True)
    if len(seeds) > 1:
        print(runs.seeds_table(rows, _PEERS.value), flush=True)
    if _OUTPUT.value:
        runs.write_json(_OUTPUT.value, rows)


if __name__ == "__main__":
    app.run(main)

"""Every numeric flag of every tool is range-checked when parsed: exit 2, one line naming it.

The ranges are declared once, in the config dataclasses' field metadata (`kbert.ranges`), and
the tools hand them to absl (`kbert.cli.command.validate_ranges`).
`test_every_numeric_flag_has_a_row` keeps the table complete as options are added.
"""

import pytest

from kbert import options
from tests.test_options import TOOLS
from tests.tools.runner import run_tool

FINE_TUNING_TOOLS = ("run_classifier.py", "run_ner.py", "run_squad.py")
# Flags a tool requires, so that parsing reaches the range checks.
REQUIRED = {
    "run_classifier.py": ["--output_dir=out"],
    "run_ner.py": ["--output_dir=out"],
    "run_squad.py": ["--output_dir=out"],
    "run_pretraining.py": ["--input_file=in", "--output_dir=out"],
    "create_pretraining_data.py": ["--input_file=in", "--output_file=out", "--vocab_file=v"],
    "extract_features.py": ["--input_file=in", "--output_file=out.jsonl",
                            "--init_checkpoint=ckpt"],
    "expand_vocab.py": ["--input_dir=in", "--output_dir=out", "--new_tokens_from_corpus=c"],
    "export_saved_model.py": ["--model=m", "--export_dir=e"],
}
# The FineTuningConfig flags every fine-tuning tool shares: (flag=value, message fragment).
SHARED = [
    ("max_seq_length=2", "max_seq_length must be >= 3"),
    ("train_batch_size=0", "train_batch_size must be >= 1"),
    ("train_batch_size=-4", "train_batch_size must be >= 1"),
    ("eval_batch_size=0", "eval_batch_size must be >= 1"),
    ("predict_batch_size=0", "predict_batch_size must be >= 1"),
    ("learning_rate=0", "learning_rate must be in (0, 1]"),
    ("learning_rate=-2e-5", "learning_rate must be in (0, 1]"),
    ("learning_rate=nan", "learning_rate must be in (0, 1]"),
    ("learning_rate=1e300", "learning_rate must be in (0, 1]"),  # trained to nan, exit 0
    ("num_train_epochs=0", "num_train_epochs must be > 0"),
    ("num_train_epochs=-1", "num_train_epochs must be > 0"),
    ("warmup_proportion=-0.1", "warmup_proportion must be in [0, 1]"),
    ("warmup_proportion=1.5", "warmup_proportion must be in [0, 1]"),
    ("seed=-1", "seed must be in [0, 4294967295]"),
    ("seed=4294967296", "seed must be in [0, 4294967295]"),
    ("head_learning_rate_multiplier=0", "head_learning_rate_multiplier must be > 0"),
    ("layerwise_lr_decay=0", "layerwise_lr_decay must be in (0, 1]"),
    ("layerwise_lr_decay=1.2", "layerwise_lr_decay must be in (0, 1]"),
    ("steps_per_execution=0", "steps_per_execution must be >= 1"),
    ("log_every_n_steps=-1", "log_every_n_steps must be >= 0"),
    ("cpu_batch_parts=0", "cpu_batch_parts must be >= 1"),
]
ROWS = [(tool, arg, fragment) for tool in FINE_TUNING_TOOLS for arg, fragment in SHARED] + [
    ("run_classifier.py", "max_train_examples=0", "max_train_examples must be >= 1"),
    ("run_classifier.py", "max_train_examples=-5", "max_train_examples must be >= 1"),
    ("run_ner.py", "max_train_examples=0", "max_train_examples must be >= 1"),
    ("run_ner.py", "window_stride=0", "window_stride must be >= 1"),
    ("run_squad.py", "max_train_examples=0", "max_train_examples must be >= 1"),
    ("run_squad.py", "doc_stride=0", "doc_stride must be >= 1"),
    ("run_squad.py", "max_query_length=0", "max_query_length must be >= 1"),
    ("run_squad.py", "max_answer_length=0", "max_answer_length must be >= 1"),
    ("run_squad.py", "n_best_size=0", "n_best_size must be >= 1"),
    ("run_squad.py", "n_best_size=-1", "n_best_size must be >= 1"),
    ("run_squad.py", "save_checkpoints_steps=0", "save_checkpoints_steps must be >= 1"),
    ("run_squad.py", "null_score_diff_threshold=nan",
     "null_score_diff_threshold must be a finite number"),
    ("run_squad.py", "null_score_diff_threshold=-inf",
     "null_score_diff_threshold must be a finite number"),
    ("run_pretraining.py", "max_seq_length=4", "max_seq_length must be in [5, 8192]"),
    ("run_pretraining.py", "max_seq_length=100000000", "max_seq_length must be in [5, 8192]"),
    ("run_pretraining.py", "max_predictions_per_seq=0",
     "max_predictions_per_seq must be in [1, 8192]"),
    ("run_pretraining.py", "masked_lm_prob=-0.1", "masked_lm_prob must be in [0, 1]"),
    ("run_pretraining.py", "masked_lm_prob=1.1", "masked_lm_prob must be in [0, 1]"),
    ("run_pretraining.py", "short_seq_prob=-0.1", "short_seq_prob must be in [0, 1]"),
    ("run_pretraining.py", "short_seq_prob=2", "short_seq_prob must be in [0, 1]"),
    ("run_pretraining.py", "train_batch_size=0", "train_batch_size must be >= 1"),
    ("run_pretraining.py", "learning_rate=0", "learning_rate must be in (0, 1]"),
    ("run_pretraining.py", "learning_rate=-1e-4", "learning_rate must be in (0, 1]"),
    ("run_pretraining.py", "num_train_steps=0", "num_train_steps must be >= 1"),
    ("run_pretraining.py", "num_warmup_steps=-1", "num_warmup_steps must be >= 0"),
    ("run_pretraining.py", "save_checkpoints_steps=0", "save_checkpoints_steps must be >= 1"),
    ("run_pretraining.py", "max_eval_steps=0", "max_eval_steps must be >= 1"),
    ("run_pretraining.py", "eval_batch_size=0", "eval_batch_size must be >= 1"),
    ("run_pretraining.py", "seed=-1", "seed must be in [0, 4294967295]"),
    ("run_pretraining.py", "steps_per_execution=0", "steps_per_execution must be >= 1"),
    ("run_pretraining.py", "log_every_n_steps=-1", "log_every_n_steps must be >= 0"),
    ("run_pretraining.py", "cpu_batch_parts=0", "cpu_batch_parts must be >= 1"),
    ("create_pretraining_data.py", "max_seq_length=4", "max_seq_length must be in [5, 8192]"),
    ("create_pretraining_data.py", "max_seq_length=100000000",
     "max_seq_length must be in [5, 8192]"),
    ("create_pretraining_data.py", "max_predictions_per_seq=0",
     "max_predictions_per_seq must be in [1, 8192]"),
    ("create_pretraining_data.py", "max_predictions_per_seq=10000",
     "max_predictions_per_seq must be in [1, 8192]"),
    ("create_pretraining_data.py", "dupe_factor=0", "dupe_factor must be >= 1"),
    ("create_pretraining_data.py", "masked_lm_prob=1.5", "masked_lm_prob must be in [0, 1]"),
    ("create_pretraining_data.py", "short_seq_prob=-0.5", "short_seq_prob must be in [0, 1]"),
    ("create_pretraining_data.py", "random_seed=-1", "random_seed must be >= 0"),
    ("create_pretraining_data.py", "num_shards=0", "num_shards must be >= 1"),
    ("create_pretraining_data.py", "num_shards=-2", "num_shards must be >= 1"),
    ("create_pretraining_data.py", "chunk_mb=0", "chunk_mb must be >= 1"),
    ("extract_features.py", "max_seq_length=1", "max_seq_length must be >= 3"),
    ("extract_features.py", "max_seq_length=2", "max_seq_length must be >= 3"),
    ("extract_features.py", "batch_size=0", "batch_size must be >= 1"),
    ("extract_features.py", "layers=-1,last", "layers must be comma-separated integers"),
    ("expand_vocab.py", "max_new_tokens=0", "max_new_tokens must be >= 1"),
    ("export_saved_model.py", "max_seq_length=2", "max_seq_length must be >= 3"),
    ("export_saved_model.py", "max_query_length=0", "max_query_length must be >= 1"),
    ("export_saved_model.py", "max_answer_length=0", "max_answer_length must be >= 1"),
    ("export_saved_model.py", "null_score_diff_threshold=inf",
     "null_score_diff_threshold must be a finite number"),
]


@pytest.mark.parametrize(("tool", "arg", "fragment"), ROWS)
def test_a_flag_out_of_range_is_a_usage_error(tool, arg, fragment):
    result = run_tool(tool, *REQUIRED[tool], f"--{arg}")
    assert result.returncode == 2, result.stderr[-2000:]
    first = result.stderr.splitlines()[0]
    name = arg.split("=")[0]
    assert first.startswith(f"error: flag --{name}=") and fragment in first, result.stderr
    assert f"  --{name}: " in result.stderr  # the flag's help follows


# Settings whose range depends on another one, or that exclude each other: checked when the
# config is made, before anything is read or loaded (the paths here do not exist).
CONFIG_ROWS = [
    ("run_classifier.py", ["--task_name=MRPC", "--data_dir=glue", "--do_eval", "--labels=a,b"],
     "error: labels is for own data; task MRPC has its own labels"),
    ("run_classifier.py", ["--task_name=MRPC", "--data_dir=glue", "--do_eval", "--regression"],
     "error: regression is for own data"),
    ("run_classifier.py", ["--train_file=t.csv", "--do_train", "--num_train_epochs=1.5"],
     "error: num_train_epochs must be a whole number (Keras fit counts epochs), got 1.5"),
    ("run_ner.py", ["--train_file=t.txt", "--do_train", "--max_seq_length=16",
                    "--window_stride=15"],
     "error: window_stride must be in [1, max_seq_length - 2 = 14] pieces, got 15"),
    ("run_squad.py", ["--predict_file=p.json", "--do_predict", "--max_seq_length=10",
                      "--max_query_length=8"],
     "error: max_seq_length (10) must be greater than max_query_length (8) + 3"),
    ("run_pretraining.py", ["--input_file=in", "--bert_config_file=c", "--max_seq_length=64",
                            "--max_predictions_per_seq=65"],
     "error: max_predictions_per_seq (65) must be at most max_seq_length (64)"),
    # TFRecords were paired and masked when written: raw-text settings have no effect there.
    ("run_pretraining.py", ["--input_file=in", "--bert_config_file=c", "--masked_lm_prob=0.5",
                            "--do_whole_word_mask"],
     "error: masked_lm_prob=0.5, do_whole_word_mask=True: raw text input only"),
]


@pytest.mark.parametrize(("tool", "args", "message"), CONFIG_ROWS)
def test_related_settings_are_checked_before_any_work(tool, args, message, tmp_path):
    result = run_tool(tool, f"--output_dir={tmp_path / 'out'}", *args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith(message), result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("tool", "arg"), [
    ("run_classifier.py", "--train_batch_size=1"), ("run_squad.py", "--n_best_size=1"),
    ("run_classifier.py", "--warmup_proportion=0"), ("run_ner.py", "--layerwise_lr_decay=1"),
    ("run_squad.py", "--seed=0"), ("run_classifier.py", "--max_train_examples=1"),
])
def test_the_bound_itself_is_accepted(tool, arg, tmp_path):
    result = run_tool(tool, f"--output_dir={tmp_path}", arg)
    assert result.returncode == 2
    # Past the flags: the config asks for a step.
    assert result.stderr.startswith("error: At least one of do_train"), result.stderr


def test_every_numeric_flag_has_a_row():
    covered = {(tool, arg.split("=")[0]) for tool, arg, _ in ROWS}
    covered.add(("run_ner.py", "window_stride"))  # its range depends on max_seq_length: above
    for tool, config_class in TOOLS.items():  # every tool's flags are its config's options
        names = {f.name for f in options.fields(config_class)
                 if options.value_type(f) in (int, float)}
        missing = {name for name in names if (tool, name) not in covered}
        assert not missing, f"{tool}: no out-of-range row for {sorted(missing)}"

"""Nothing lost: every tool that writes a directory refuses to replace a finished run, another
run's progress or its own input, lets one writer in at a time, and says so in one line."""

import errno
import functools
import json
import os
import shutil
import subprocess
import sys
from unittest import mock

import keras

from kbert.tasks import backups
from tests.limits import SUBPROCESS_TIMEOUT
from tests.tools.runner import run_tool

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
WIKI = os.path.join(FIXTURES, "enwiki_wiki_29_head.txt")
MRPC = os.path.join(FIXTURES, "glue", "MRPC")
classify = functools.partial(run_tool, "run_classifier.py")


def pretraining_flags(tiny_google_dir, out, *extra, steps_per_backup=2):
    return (f"--input_file={WIKI}", "--input_format=wikiextractor", "--pair_task=none",
            f"--bert_config_file={tiny_google_dir}/bert_config.json", f"--output_dir={out}",
            "--max_seq_length=16", "--max_predictions_per_seq=3", "--train_batch_size=4",
            "--num_train_steps=2", f"--save_checkpoints_steps={steps_per_backup}",
            "--num_warmup_steps=1", *extra)


def pretrain(*flags):
    return run_tool("run_pretraining.py", *flags)


def mrpc_flags(tiny_google_dir, out, data_dir=MRPC, *extra):
    return ("--task_name=MRPC", f"--data_dir={data_dir}", f"--init_checkpoint={tiny_google_dir}",
            f"--output_dir={out}", "--max_seq_length=16", "--train_batch_size=4",
            "--max_train_examples=4", *extra)


def one_error_line(result):
    """The `error:` line of a run that failed with exit status 2 (bad input)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def test_pretraining_never_trains_over_a_finished_or_another_run(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    assert pretrain(*pretraining_flags(tiny_google_dir, out)).returncode == 0
    checkpoint = (out / "model.ckpt-2.index").read_bytes()
    assert "holds a finished run" in one_error_line(pretrain(*pretraining_flags(
        tiny_google_dir, out)))
    assert "settings.learning_rate: was 5e-05, now 0.001" in one_error_line(pretrain(
        *pretraining_flags(tiny_google_dir, out, "--learning_rate=1e-3")))
    other = tmp_path / "other"
    shutil.copytree(tiny_google_dir, other)
    config = json.loads((other / "bert_config.json").read_text())
    (other / "bert_config.json").write_text(json.dumps({**config, "intermediate_size": 24}))
    assert "bert_config.intermediate_size: was 20, now 24" in one_error_line(pretrain(
        *pretraining_flags(other, out)))
    assert (out / "model.ckpt-2.index").read_bytes() == checkpoint


class StopAfterFirstSave(backups.SaveModel):
    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        raise KeyboardInterrupt  # a kill once the first backup is written


def test_a_killed_pretraining_run_resumes_only_with_its_own_flags(tiny_google_dir, tmp_path,
                                                                   monkeypatch):
    out = tmp_path / "out"
    flags = functools.partial(pretraining_flags, tiny_google_dir, out, steps_per_backup=1)
    monkeypatch.setattr(backups, "SaveModel", StopAfterFirstSave)
    assert pretrain(*flags()).returncode == 130
    monkeypatch.undo()
    backup = sorted(os.listdir(out / "backup"))
    for changed in ("--learning_rate=1e-3", "--train_batch_size=2"):
        assert "holds another run" in one_error_line(pretrain(*flags(changed)))
    assert sorted(os.listdir(out / "backup")) == backup == ["epoch-000001"]
    result = pretrain(*flags())
    assert result.returncode == 0, result.stderr[-3000:]
    train = json.loads((out / "train_results.json").read_text())["train"]
    assert (train["global_step"], train["steps_this_run"]) == (2, 1)
    assert not (out / "backup").exists()


def test_a_run_refused_by_validation_leaves_nothing_in_the_way(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    for bad in ("--train_batch_size=0", f"--vocab_file={tmp_path}/missing.txt"):
        assert one_error_line(pretrain(*pretraining_flags(tiny_google_dir, out, bad)))
        assert not out.exists()  # no run_manifest.json to refuse the corrected command


def test_pretraining_never_writes_into_its_start_point(tiny_google_dir, tmp_path):
    release = tmp_path / "release"
    shutil.copytree(tiny_google_dir, release)
    before = {path.name: path.read_bytes() for path in release.iterdir()}
    flags = [flag for flag in pretraining_flags(tiny_google_dir, release)
             if not flag.startswith("--bert_config_file=")]
    for extra in ((), ("--overwrite_output_dir",)):
        assert f"{release}: is the init_checkpoint this run reads" in one_error_line(pretrain(
            *flags, f"--init_checkpoint={release}", "--init_heads=fresh", *extra))
    assert {path.name: path.read_bytes() for path in release.iterdir()} == before


def test_pretraining_refuses_an_output_dir_holding_other_files(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's")
    assert "holds notes.txt of a run without" in one_error_line(pretrain(*pretraining_flags(
        tiny_google_dir, out)))
    assert sorted(os.listdir(out)) == ["notes.txt"]
    # --overwrite_output_dir starts there, and leaves what is not the run's.
    result = pretrain(*pretraining_flags(tiny_google_dir, out, "--overwrite_output_dir"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "notes.txt").read_text() == "the user's" and (out / "model.ckpt-2.index").exists()


def test_expand_vocab_never_writes_into_its_input_or_over_a_release(tiny_google_dir, tmp_path):
    release = tmp_path / "release"
    shutil.copytree(tiny_google_dir, release)
    before = {name: (release / name).read_bytes() for name in os.listdir(release)}
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("kinase\n")
    expand = functools.partial(run_tool, "expand_vocab.py", f"--input_dir={release}",
                               f"--new_tokens_file={tokens}", "--mode=append")
    assert "is the input release this run reads" in one_error_line(
        expand(f"--output_dir={release}", "--overwrite_output_dir"))
    assert {name: (release / name).read_bytes() for name in os.listdir(release)} == before
    assert expand(f"--output_dir={tmp_path / 'out'}").returncode == 0
    assert "holds a finished run" in one_error_line(expand(f"--output_dir={tmp_path / 'out'}"))
    assert expand(f"--output_dir={tmp_path / 'out'}", "--overwrite_output_dir").returncode == 0
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("the user's")
    assert "holds notes.txt of a run without" in one_error_line(
        expand(f"--output_dir={tmp_path / 'busy'}"))


def test_convert_checkpoint_never_replaces_an_output_or_its_input(tiny_google_dir, tmp_path):
    convert = functools.partial(run_tool, "convert_checkpoint.py", f"--input={tiny_google_dir}")
    out = tmp_path / "hf"
    assert convert(f"--output_dir={out}", "--to=huggingface").returncode == 0
    weights = (out / "model.safetensors").read_bytes()
    assert "holds a finished run" in one_error_line(convert(f"--output_dir={out}",
                                                            "--to=huggingface"))
    assert "holds another run" in one_error_line(convert(f"--output_dir={out}"))
    assert (out / "model.safetensors").read_bytes() == weights
    # Replacing a conversion removes only its files (not a note the user put beside them).
    (out / "notes.txt").write_text("the user's")
    assert convert(f"--output_dir={out}", "--overwrite_output_dir").returncode == 0
    assert not (out / "model.safetensors").exists() and (out / "notes.txt").exists()
    assert "is the input this run reads" in one_error_line(
        convert(f"--output_dir={tiny_google_dir}", "--overwrite_output_dir"))


def test_evaluating_a_finished_run_on_other_data_keeps_its_results(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    result = classify(*mrpc_flags(tiny_google_dir, out, MRPC, "--do_train", "--do_eval",
                                  "--num_train_epochs=1"))
    assert result.returncode == 0, result.stderr[-3000:]
    results = (out / "eval_results.json").read_text()
    other = tmp_path / "other"
    shutil.copytree(MRPC, other)
    (other / "dev.tsv").write_text("\n".join((other / "dev.tsv").read_text().splitlines()[:3]))
    evaluate = functools.partial(classify, "--task_name=MRPC", f"--output_dir={out}",
                                 "--do_eval", "--max_seq_length=16")
    line = one_error_line(evaluate(f"--data_dir={other}"))
    assert "eval_results.json: holds results on other data" in line and "other" in line
    assert (out / "eval_results.json").read_text() == results
    assert evaluate(f"--data_dir={MRPC}").returncode == 0  # the same dev set again: fine


def test_starting_over_leaves_no_predictions_of_the_old_model(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    first = classify(*mrpc_flags(tiny_google_dir, out, MRPC, "--do_train", "--do_eval",
                                 "--do_predict", "--num_train_epochs=1"))
    assert first.returncode == 0, first.stderr[-3000:]
    assert {"dev_predictions.tsv", "MRPC.tsv"} <= set(os.listdir(out))
    (out / "notes.txt").write_text("mine")
    again = classify(*mrpc_flags(tiny_google_dir, out, MRPC, "--do_train",
                                 "--num_train_epochs=1", "--overwrite_output_dir"))
    assert again.returncode == 0, again.stderr[-3000:]
    left = set(os.listdir(out))
    assert not left & {"dev_predictions.tsv", "MRPC.tsv"} and "notes.txt" in left, left


def test_a_users_file_named_like_a_run_output_is_not_replaced(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "vocab.txt").write_text("my own word list\n")
    line = one_error_line(classify(*mrpc_flags(tiny_google_dir, out, MRPC, "--do_train")))
    assert "holds vocab.txt" in line and "--overwrite_output_dir" in line, line
    assert (out / "vocab.txt").read_text() == "my own word list\n"


def test_a_full_disk_is_one_line_and_the_next_run_resumes(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    flags = mrpc_flags(tiny_google_dir, out, MRPC, "--do_train", "--num_train_epochs=2")
    save_weights = keras.Model.save_weights
    calls = []

    def fills_the_disk(self, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:  # the backup of epoch 2
            raise OSError(errno.ENOSPC, "No space left on device")
        return save_weights(self, path, *args, **kwargs)

    with mock.patch.object(keras.Model, "save_weights", fills_the_disk):
        line = one_error_line(classify(*flags))
    assert line.startswith(f"error: {out}/backup/epoch-000002/model.weights.h5: no space left "
                           "on device (it needs about "), line
    assert "free there) — free some space and run the same command again" in line
    result = classify(*flags)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "restored from backup: epoch 1" in result.stderr
    assert json.loads((out / "train_results.json").read_text())["epochs_this_run"] == 1


def test_a_second_run_into_the_same_directory_is_refused_at_once(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nos.write(fd, b'%d' % os.getpid())\n"
         "print(flush=True)\ntime.sleep(60)\n", str(out / ".kbert.lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        line = one_error_line(classify(*mrpc_flags(tiny_google_dir, out, MRPC, "--do_train")))
        assert f"another run (pid {holder.pid}) is writing {out}" in line
    finally:
        holder.kill()
        holder.wait(SUBPROCESS_TIMEOUT)
    assert sorted(os.listdir(out)) == [".kbert.lock"]  # the refused run wrote nothing


def test_a_second_export_into_the_same_directory_is_refused_at_once(tiny_google_dir, tmp_path):
    lock = tmp_path / ".1.kbert.lock"  # beside --export_dir, which the export replaces
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nos.write(fd, b'%d' % os.getpid())\n"
         "print(flush=True)\ntime.sleep(60)\n", str(lock)],
        stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        line = one_error_line(run_tool("export_saved_model.py", f"--model={tiny_google_dir}",
                                       f"--export_dir={tmp_path / '1'}", "--overwrite",
                                       "--max_seq_length=16"))
        assert f"another run (pid {holder.pid}) is writing {tmp_path / '1'}" in line, line
    finally:
        holder.kill()
        holder.wait(SUBPROCESS_TIMEOUT)
    assert sorted(os.listdir(tmp_path)) == [lock.name]  # nothing exported


def test_pretraining_data_is_not_skipped_after_its_input_was_edited(tiny_google_dir, tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat on the mat .\nit was a cat .\n\nhe said that .\n")
    create = functools.partial(
        run_tool, "create_pretraining_data.py", f"--input_file={text}",
        f"--output_file={tmp_path}/train.tfrecord", f"--vocab_file={tiny_google_dir}/vocab.txt",
        "--dupe_factor=1", "--max_seq_length=16", "--max_predictions_per_seq=3")
    assert create().returncode == 0
    shard = (tmp_path / "train.tfrecord").read_bytes()
    text.write_text(text.read_text().replace("cat", "dog"))  # the same size
    line = one_error_line(create())
    assert f"input files changed since it was written: {text}" in line
    assert (tmp_path / "train.tfrecord").read_bytes() == shard
    assert "is an input of this run" in one_error_line(run_tool(
        "create_pretraining_data.py", f"--input_file={text}", f"--output_file={text}",
        f"--vocab_file={tiny_google_dir}/vocab.txt"))


def test_extract_features_never_replaces_its_input(tiny_google_dir, tmp_path):
    text = tmp_path / "in.jsonl"
    text.write_text("the cat\n")
    assert "would be replaced by this run's output" in one_error_line(run_tool(
        "extract_features.py", f"--input_file={text}", f"--output_file={text}",
        f"--init_checkpoint={tiny_google_dir}", "--max_seq_length=16", "--layers=-1"))
    assert text.read_text() == "the cat\n"


def test_export_on_a_full_disk_is_one_line(tiny_google_dir, tmp_path):
    export_dir = tmp_path / "export"
    full = OSError(errno.ENOSPC, "No space left on device")
    with mock.patch("tensorflow.saved_model.save", side_effect=full):
        line = one_error_line(run_tool("export_saved_model.py", f"--model={tiny_google_dir}",
                                       f"--export_dir={export_dir}", "--max_seq_length=8"))
    assert line.startswith(f"error: {export_dir}: no space left on device ("), line
    assert "free some space and run the same command again" in line
    assert os.listdir(tmp_path) == []  # no temporary directory left


def test_extract_features_never_replaces_an_output_without_overwrite(tiny_google_dir, tmp_path):
    text, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    text.write_text("the cat\n")
    out.write_text("the user's\n")
    extract = functools.partial(
        run_tool, "extract_features.py", f"--input_file={text}", f"--output_file={out}",
        f"--init_checkpoint={tiny_google_dir}", "--max_seq_length=16", "--layers=-1")
    line = one_error_line(extract())
    assert f"{out}: exists" in line and "--overwrite" in line, line
    assert out.read_text() == "the user's\n"
    assert extract("--overwrite").returncode == 0
    assert json.loads(out.read_text())["features"]  # replaced by the features of "the cat"
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.jsonl"]  # no lock or temporary

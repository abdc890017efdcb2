"""The output guard: lock, run manifest semantics, inputs never overwritten."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kbert import artifacts
from tests.limits import SUBPROCESS_TIMEOUT

# What `artifacts.locked` does, without importing kbert (TensorFlow) in the process.
HOLD_LOCK = ("import fcntl, os, sys, time\n"
             "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "os.write(fd, f'{os.getpid()}\\n'.encode())\n"
             "print('locked', flush=True)\n"
             "time.sleep(60)\n")


def hold_lock(directory):
    """A process that holds `directory`'s lock until killed, as a run writing it does."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, os.path.join(directory, artifacts.LOCK_FILE)],
        stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_writer_is_refused_at_once_with_the_first_ones_pid(tmp_path):
    holder = hold_lock(tmp_path)
    try:
        began = time.monotonic()
        busy = rf"another run \(pid {holder.pid}\) is writing {tmp_path}"
        with pytest.raises(artifacts.Busy, match=busy), artifacts.locked(tmp_path):
            pass
        assert time.monotonic() - began < 1
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(SUBPROCESS_TIMEOUT)
    # The kernel released the dead holder's lock: the next run goes ahead, and leaves no file.
    with artifacts.locked(tmp_path), artifacts.locked(tmp_path):  # nested: one lock
        assert os.listdir(tmp_path) == [artifacts.LOCK_FILE]
    assert os.listdir(tmp_path) == []


def test_a_directory_made_for_the_lock_goes_when_left_empty(tmp_path):
    with pytest.raises(ValueError, match="refused"), artifacts.locked(tmp_path / "new"):
        raise ValueError("refused")
    assert not (tmp_path / "new").exists()


def test_claim_resumes_the_same_run_and_refuses_another_or_a_finished_one(tmp_path):
    out = tmp_path / "out"
    owned, progress = ("backup", "model.keras"), ("backup",)
    first = {"settings": {"learning_rate": 0.1}}
    assert not artifacts.claim(out, first, owned=owned, progress=progress).resumed
    (out / "backup").mkdir()  # progress of the first run
    assert artifacts.claim(out, first, owned=owned, progress=progress).resumed
    other = {"settings": {"learning_rate": 0.2}}
    with pytest.raises(ValueError, match=r"holds another run \(settings.learning_rate: was 0.1, "
                                         r"now 0.2\); pass --overwrite_output_dir"):
        artifacts.claim(out, other, owned=owned, progress=progress)
    artifacts.finish(out)
    (out / "backup").rmdir()
    with pytest.raises(ValueError, match="holds a finished run with these settings"):
        artifacts.claim(out, first, owned=owned, progress=progress)
    with pytest.raises(ValueError, match="holds another run"):
        artifacts.claim(out, other, owned=owned, progress=progress)
    (out / "model.keras").write_text("old")
    (out / "data.tsv").write_text("not ours")
    artifacts.claim(out, other, overwrite_output_dir=True, owned=owned, progress=progress)
    assert sorted(os.listdir(out)) == ["data.tsv", artifacts.MANIFEST_FILE]
    manifest = json.loads((out / artifacts.MANIFEST_FILE).read_text())
    assert manifest == {**other, "finished": False}


def test_a_run_that_failed_before_any_progress_is_taken_over(tmp_path):
    # e.g. --train_batch_size=0 failed after the claim: the corrected command is not "another".
    artifacts.claim(tmp_path, {"settings": {"batch": 0}}, owned=("backup",), progress=("backup",))
    claim = artifacts.claim(tmp_path, {"settings": {"batch": 4}}, owned=("backup",),
                            progress=("backup",))
    assert not claim.resumed


def test_files_of_a_run_without_a_manifest_refuse_the_claim(tmp_path):
    (tmp_path / "model.keras").write_text("an older kbert's")
    with pytest.raises(ValueError, match="holds model.keras of a run without run_manifest.json"):
        artifacts.claim(tmp_path, {}, owned=("model.keras",))
    (tmp_path / "model.keras").unlink()
    (tmp_path / "config.json").write_text("someone's model")
    with pytest.raises(ValueError, match="holds config.json of a run without"):
        artifacts.claim(tmp_path, {})  # owns the whole directory


def test_a_whole_directory_run_records_and_replaces_only_its_files(tmp_path):
    claim = artifacts.claim(tmp_path, {"input": 1})
    (tmp_path / "weights").write_text("1")
    claim.finish()
    assert json.loads((tmp_path / artifacts.MANIFEST_FILE).read_text())["files"] == ["weights"]
    (tmp_path / "notes.txt").write_text("the user's")
    claim = artifacts.claim(tmp_path, {"input": 2}, overwrite_output_dir=True)
    assert sorted(os.listdir(tmp_path)) == ["notes.txt", artifacts.MANIFEST_FILE]
    (tmp_path / "other").write_text("2")
    claim.finish()
    assert json.loads((tmp_path / artifacts.MANIFEST_FILE).read_text())["files"] == ["other"]


def test_never_into_an_input(tmp_path):
    release = tmp_path / "release"
    release.mkdir()
    (release / "bert_model.ckpt.index").write_text("")
    with pytest.raises(ValueError, match=r"release: is the input release this run reads"):
        artifacts.claim(release, {}, overwrite_output_dir=True,
                        inputs=[("input release", str(release))])
    with pytest.raises(ValueError, match=r"bert_model.ckpt: the checkpoint would be replaced by "
                                         r"this run's output in"):
        artifacts.check_not_input(release, [("checkpoint", str(release / "bert_model.ckpt"))],
                                  owned=("bert_model.ckpt*",))
    # An input beside outputs of other names, or an output inside the input's directory: fine.
    artifacts.check_not_input(release, [("vocab", str(release / "vocab.txt"))], ("model.*",))
    artifacts.check_not_input(release / "expanded", [("input release", str(release))])


def test_results_are_replaced_only_by_results_on_the_same_data(tmp_path):
    dev, other = tmp_path / "dev.tsv", tmp_path / "other.tsv"
    dev.write_text("a\n")
    other.write_text("b\n")  # the same size: compared by content
    (tmp_path / "eval_results.json").write_text(json.dumps(
        {"data": {"dev_file": artifacts.fingerprint(dev)}}))
    artifacts.check_results_data(tmp_path, "eval_results.json",
                                 {"dev_file": artifacts.fingerprint(dev)})
    with pytest.raises(ValueError, match=r"eval_results.json: holds results on other data "
                                         r"\(dev_file: .*dev.tsv then, .*other.tsv now\)"):
        artifacts.check_results_data(tmp_path, "eval_results.json",
                                     {"dev_file": artifacts.fingerprint(other)})
    artifacts.check_results_data(tmp_path, "eval_results.json",
                                 {"dev_file": artifacts.fingerprint(other)},
                                 overwrite_output_dir=True)


def test_fingerprint_of_a_file_a_directory_and_a_checkpoint_prefix(tmp_path):
    (tmp_path / "model.ckpt.index").write_text("i")
    (tmp_path / "model.ckpt.data-00000-of-00001").write_text("d")
    prefix = artifacts.fingerprint(tmp_path / "model.ckpt")
    tree = artifacts.fingerprint(tmp_path)
    (tmp_path / "model.ckpt.index").write_text("j")
    assert artifacts.fingerprint(tmp_path / "model.ckpt")["sha256"] != prefix["sha256"]
    assert artifacts.fingerprint(tmp_path)["sha256"] != tree["sha256"]
    with pytest.raises(FileNotFoundError):
        artifacts.fingerprint(tmp_path / "nothing")


def test_an_edited_input_is_named_by_its_path(tmp_path):
    out = tmp_path / "out"
    data = tmp_path / "train.csv"
    data.write_text("text,label\na,pos\n")
    run = {"data": {"train_file": artifacts.fingerprint(str(data))}}
    artifacts.claim(out, run, owned=("model.keras",), progress=("backup",))
    (out / "backup").mkdir()
    data.write_text("text,label\na,pos\nb,neg\n")
    edited = {"data": {"train_file": artifacts.fingerprint(str(data))}}
    with pytest.raises(ValueError, match=rf"data.train_file: {data} was edited since that run"):
        artifacts.claim(out, edited, owned=("model.keras",), progress=("backup",))

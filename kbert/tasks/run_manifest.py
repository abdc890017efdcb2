"""The run manifest: a restart resumes only the same run, and a finished run is not overwritten.

`run_manifest.json` in the output dir holds the settings that change what training does, the
SHA-256 of the checkpoint, vocab and data files, and the kbert version.
"""

import dataclasses
import hashlib
import importlib.metadata
import os
import shutil

from absl import logging

from kbert import io
from kbert.tasks import epoch_callbacks
from kbert.tasks import fine_tuning

# Settings that do not change what training does: a restart may change them.
_NOT_IN_MANIFEST = ("output_dir", "overwrite_output_dir", "do_eval", "do_predict",
                    "eval_batch_size", "predict_batch_size", "test_file", "predict_file",
                    "allow_casing_mismatch")


# What an earlier run leaves that --overwrite_output_dir removes.
_RUN_DIRS = (fine_tuning.BACKUP_DIR, epoch_callbacks.LOG_DIR)
_RUN_FILES = (fine_tuning.MANIFEST_FILE, fine_tuning.MODEL_FILE, epoch_callbacks.TRAINING_LOG_FILE,
              fine_tuning.TRAIN_RESULTS_FILE, fine_tuning.EVAL_RESULTS_FILE + ".txt",
              fine_tuning.EVAL_RESULTS_FILE + ".json")


def manifest_for(config, source, data_files=()):
    """What identifies a training run: settings, checkpoint, vocab and data fingerprints.

    Args:
        config: `FineTuningConfig`.
        source: `InitSource`, or None for a model trained from scratch.
        data_files: sequence of (name, path) of the data read.
    """
    settings = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)
                if field.name not in _NOT_IN_MANIFEST}
    settings = {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
                for k, v in settings.items()}
    return {
        "settings": settings,
        "init_checkpoint": source and _fingerprint(source.checkpoint_file),
        "vocab_file": source and _fingerprint(source.vocab_file),
        "data": {name: _fingerprint(path) for name, path in data_files if path},
        "kbert_version": importlib.metadata.version("kbert"),
    }


def begin_training(config, manifest):
    """Makes `output_dir` ready for a training run described by `manifest`.

    Nothing there: the manifest is written. The same run, interrupted: it resumes (its
    `backup/` is restored by `fit_and_record`). Another run, a finished one, or files of an
    older kbert without a manifest: ValueError naming what differs, unless
    `overwrite_output_dir`, which removes them first.
    """
    out = config.output_dir
    path = os.path.join(out, fine_tuning.MANIFEST_FILE)
    old = io.read_json(path) or None
    ways_out = (f"pass --overwrite_output_dir to start over in {out}, or choose another "
                f"--output_dir")
    if config.overwrite_output_dir:
        for name in _RUN_DIRS:
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)
        for name in _RUN_FILES:
            if os.path.exists(os.path.join(out, name)):
                os.remove(os.path.join(out, name))
        old = None
    elif old is None:
        leftovers = [n for n in (fine_tuning.MODEL_FILE, fine_tuning.BACKUP_DIR)
                     if os.path.exists(os.path.join(out, n))]
        if leftovers:
            raise ValueError(f"{out}: holds {', '.join(leftovers)} of a run without "
                             f"{fine_tuning.MANIFEST_FILE}; {ways_out}")
    else:
        recorded = {k: v for k, v in old.items() if k != "finished"}
        differences = _differences(recorded, manifest)
        if differences:
            raise ValueError(f"{path}: {out} holds another run ({'; '.join(differences)}); "
                             f"{ways_out}")
        if old.get("finished"):
            raise ValueError(f"{out}: holds a finished run with these settings; {ways_out}")
        logging.info("%s: the same run, interrupted: resuming from %s", out, fine_tuning.BACKUP_DIR)
    io.write_json(path, {**manifest, "finished": False})


def finish_training(config):
    """Marks the run in `output_dir` finished: a rerun needs `overwrite_output_dir`."""
    path = os.path.join(config.output_dir, fine_tuning.MANIFEST_FILE)
    io.write_json(path, {**io.read_json(path), "finished": True})


def _differences(old, new, prefix=""):
    found = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key}: was {a!r}, now {b!r}")
    return found


def _fingerprint(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"path": os.path.abspath(path), "sha256": digest.hexdigest()}

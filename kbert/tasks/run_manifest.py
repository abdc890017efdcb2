"""The run manifest: a restart resumes only the same run, and a finished run is not overwritten.

`run_manifest.json` in the output dir holds the settings that change what training does, the
SHA-256 of the checkpoint, vocab and data files, and the kbert version.
"""

import dataclasses
import os
import shutil

from kbert import artifacts
from kbert.checkpoints import tf1
from kbert.data import glue
from kbert.tasks import epoch_callbacks
from kbert.tasks import squad_postprocess
from kbert.tokenization import vocab

# Settings that do not change what training does: a restart may change them.
_NOT_IN_MANIFEST = ("output_dir", "overwrite_output_dir", "do_eval", "do_predict",
                    "eval_batch_size", "predict_batch_size", "test_file", "predict_file",
                    "allow_casing_mismatch")


# What an earlier run leaves that --overwrite_output_dir removes; without a manifest, any of
# them refuses the run.
_RUN_DIRS = (artifacts.BACKUP_DIR, epoch_callbacks.LOG_DIR)
_RUN_FILES = (artifacts.MODEL_FILE, epoch_callbacks.TRAINING_LOG_FILE,
              artifacts.TRAIN_RESULTS_FILE, artifacts.EVAL_RESULTS_FILE + ".txt",
              artifacts.EVAL_RESULTS_FILE + ".json", tf1.RELEASE_PREFIX + ".*",
              "checkpoint",  # the state file beside bert_model.ckpt
              # what every run writes beside the model: a user's own file of one of these
              # names is refused, not replaced (ner.LABELS_FILE is labels.txt)
              artifacts.VOCAB_FILE, vocab.ADDED_TOKENS_FILE, artifacts.BERT_CONFIG_FILE,
              artifacts.EXPORT_SETTINGS_FILE, "labels.txt",
              # predictions: a run started over without --do_predict must not leave the old
              # model's (GLUE test files are named after the task: MRPC.tsv, MNLI-m.tsv, ...)
              squad_postprocess.PREDICTIONS_FILE, squad_postprocess.NBEST_FILE,
              squad_postprocess.NULL_ODDS_FILE,
              "test_predictions.tsv", "dev_predictions.txt", "test_predictions.txt",  # NER: .txt
              *sorted({f"{split}_predictions.tsv" for spec in glue.GLUE_TASKS.values()
                       for split, _ in spec.dev_files}
                      | {f"{name}.tsv" for spec in glue.GLUE_TASKS.values()
                         for _, _, name in spec.test_files}))


def manifest_for(config, source, data_files=()):
    """What identifies a training run: settings, checkpoint, vocab and data fingerprints.

    Args:
        config: `FineTuningConfig`.
        source: `kbert.models.opening.OpenedModel`, or None for a model trained from
            scratch.
        data_files: sequence of (name, path) of the data read.
    """
    settings = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)
                if field.name not in _NOT_IN_MANIFEST}
    settings = {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
                for k, v in settings.items()}
    return {
        "settings": settings,
        "init_checkpoint": source and artifacts.fingerprint(source.checkpoint_file),
        "vocab_file": source and artifacts.fingerprint(source.vocab_file),
        "data": {name: artifacts.fingerprint(path) for name, path in data_files if path},
        "kbert_version": artifacts.kbert_version(),
    }


def begin_training(config, manifest):
    """Makes `output_dir` ready for a training run described by `manifest`.

    `kbert.artifacts.claim`: nothing there, or an earlier run that failed before its first
    backup: the manifest is written. The same run, interrupted: it resumes (its `backup/` is
    restored by `fit_and_record`). Another run, a finished one, or files of an older kbert
    without a manifest: ValueError naming what differs, unless `overwrite_output_dir`, which
    removes them first. An input in the way (`init_checkpoint` is `output_dir/model.keras`):
    ValueError, even with `overwrite_output_dir`.

    Args:
        config: `FineTuningConfig`.
        manifest: dict, from `manifest_for`; its fingerprints name the inputs.
    """
    inputs = [(name, manifest[name]["path"]) for name in ("init_checkpoint", "vocab_file")
              if manifest.get(name)]
    inputs += [(name, entry["path"]) for name, entry in manifest["data"].items()]
    artifacts.claim(config.output_dir, manifest, overwrite_output_dir=config.overwrite_output_dir,
                    inputs=inputs, owned=_RUN_DIRS + _RUN_FILES,
                    progress=(artifacts.BACKUP_DIR,))


def finish_training(config):
    """Marks the run in `output_dir` finished (a rerun needs `overwrite_output_dir`), then
    removes its `backup/`: call it once the outputs are written."""
    artifacts.finish(config.output_dir)
    shutil.rmtree(os.path.join(config.output_dir, artifacts.BACKUP_DIR), ignore_errors=True)

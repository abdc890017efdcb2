"""The recipe template: `run(config, Recipe)` owns the order every fine-tuning run follows.

    1. open the start point (`kbert.models.opening.open_model`: its checkpoint opened and its
       vocab read once for the run) and check every input (files exist and parse, lengths
       fit, casing, a trained head to score) — before any work;
    2. guard the output (`kbert.tasks.run_manifest`: the same run resumes, another is refused);
    3. build the model, then train it: `fine_tuning.fit_and_record` (backups, dev scores after
       every epoch, the best epoch kept, logs, progress);
    4. write the shared output layout (`fine_tuning.write_outputs`) and mark the run finished;
    5. score the dev data and predict the test data, then write eval_results.txt/.json.

A recipe subclasses `Recipe` and supplies only what is its own: which files it reads and how,
its head, its training dataset, how it scores and what it writes. `kbert.tasks.glue`,
`multi_label`, `ner` and `squad` are recipes.
"""

import dataclasses
import os

import keras

from kbert.models import opening
from kbert.tasks import epoch_callbacks
from kbert.tasks import fine_tuning
from kbert.tasks import run_manifest
from kbert.tasks import strategies


@dataclasses.dataclass
class Training:
    """What a recipe trains on.

    Attributes:
        dataset: `tf.data.Dataset` of (inputs, targets), seeded, or what
            `fine_tuning.fit_and_record` takes in its place.
        steps_per_epoch: int.
        stats: dict. Entries for train_results.json (task, examples, ...).
        compile_kwargs: dict. More `model.compile` arguments (a loss, metrics).
        model: the model to fit when it is not the recipe's model (a packed twin whose
            weights go back into it after training). Defaults to the recipe's model.
        parts, parts_per_epoch: int. Epochs cut into parts (`fine_tuning.fit_and_record`):
            `steps_per_epoch` is then the steps of a part. Default to None (whole epochs)
            and 1.
    """

    dataset: object
    steps_per_epoch: int
    stats: dict
    compile_kwargs: dict = dataclasses.field(default_factory=dict)
    model: object = None
    parts: int | None = None
    parts_per_epoch: int = 1


@dataclasses.dataclass
class Scored:
    """What scoring and predicting gave.

    Attributes:
        eval: {split: scores} of the labelled data scored, written to eval_results.
        predict: {name: path} of the prediction files written.
        flat: {"split_metric": value} for eval_results.txt; defaults to every number of
            `eval`.
        extra: more top-level eval_results entries (the task name, ...).
        summary: the scores of a run that scores one file, in place of `eval`: written at
            the top level of eval_results, as an official script prints them (SQuAD).
    """

    eval: dict = dataclasses.field(default_factory=dict)
    predict: dict = dataclasses.field(default_factory=dict)
    flat: dict | None = None
    extra: dict = dataclasses.field(default_factory=dict)
    summary: dict | None = None


class Recipe:
    """What a task supplies to `run`; each method sees the run's config as `self.config`.

    Attributes:
        head: the task model class (e.g. `BertClassifier`): evaluating a Google checkpoint
            without such a head is refused (`fine_tuning.check_trained_head`).
    """

    head = None

    def __init__(self, config):
        self.config = config

    def open(self):
        """The start point: a `kbert.models.opening.OpenedModel`, or None for a model from
        scratch."""
        config = self.config
        return opening.open_model(config.model_path(), config.vocab_file,
                                  config.bert_config_file)

    def data_files(self, source):
        """[(name, path)] of every file the steps asked for, named as their options."""
        return self.config.data_files()

    def read(self, files):
        """{name: parsed data} of `files`: every file is parsed before any training."""
        raise NotImplementedError

    def build_model(self, source, data):
        """The model to train or score, in the current strategy scope and precision."""
        raise NotImplementedError

    def training(self, model, data):
        """`Training`: the dataset and what train_results.json records."""
        raise NotImplementedError

    def dev_scorer(self, model, data):
        """(metric, fn) where `fn(model) -> (scores, outputs)` scores the dev data after every
        epoch and `scores[metric]` picks the best one; None without a dev set."""
        return None

    def export_settings(self, model, data, reused):
        """export_settings.json: what `export_saved_model` needs besides the model; `reused`
        as in `score`."""
        raise NotImplementedError

    def write_extra(self, output_dir):
        """Writes the recipe's own files beside the shared layout after training."""

    def score(self, model, data, output_dir, reused):
        """`Scored`: scores the dev data (do_eval), predicts the test data (do_predict).
        `reused` is the kept epoch's dev outputs when training computed them, else None."""
        raise NotImplementedError


def run(config, recipe_class):
    """Runs the steps `config` asks for with `recipe_class` (a `Recipe`) and writes their
    results to `config.output_dir`.

    Returns:
        dict with "train" (fit statistics), "eval" ({split: scores}) and "predict" ({name:
        path}) for the steps that ran.
    """
    with strategies.run_scope(config) as (_, output_dir):
        return _run(recipe_class(config), output_dir)


def _run(recipe, output_dir):
    """The steps of `run` for `recipe`, writing to `output_dir` (this worker's)."""
    config = recipe.config
    source = recipe.open()
    files = recipe.data_files(source)
    fine_tuning.validate_inputs(config, source, files)
    if recipe.head is not None:
        fine_tuning.check_trained_head(config, source, recipe.head)
    data = recipe.read(files)
    keras.utils.set_random_seed(config.seed)
    if config.do_train:
        run_manifest.begin_training(config, run_manifest.manifest_for(config, source, files))
    model = recipe.build_model(source, data)
    model.batch_parts = config.cpu_batch_parts
    os.makedirs(output_dir, exist_ok=True)
    results, reused = {}, None
    if config.do_train:
        results["train"], reused = _train(recipe, model, data, output_dir)
        fine_tuning.write_outputs(output_dir, model,
                                  source.vocab_file if source else config.vocab_file,
                                  recipe.export_settings(model, data, reused))
        recipe.write_extra(output_dir)
        run_manifest.finish_training(config)
    scored = recipe.score(model, data, output_dir, reused)
    if scored.eval or scored.summary:
        results["eval"] = scored.eval or scored.summary
        # A packed run's optimizer trained a twin model: its step count is the run's.
        step = (results["train"]["steps"] if "train" in results
                else strategies.global_step(model))
        fine_tuning.write_eval_results(
            output_dir, scored.eval, step, flat=scored.flat, data_files=files,
            **(scored.summary or {}), **scored.extra,
            **fine_tuning.kept_epoch_summary(results.get("train")))
    if scored.predict:
        results["predict"] = scored.predict
    return results


def _train(recipe, model, data, output_dir):
    """Fits `model`; returns (train_results, the kept epoch's dev outputs or None)."""
    config = dataclasses.replace(recipe.config, output_dir=output_dir)
    training = recipe.training(model, data)
    scorer = recipe.dev_scorer(model, data)
    dev_scores = epoch_callbacks.DevScores(scorer[1], scorer[0]) if scorer else None
    trained = training.model or model
    trained.batch_parts = model.batch_parts
    stats = fine_tuning.fit_and_record(
        trained, training.dataset, training.steps_per_epoch, config, dev_scores=dev_scores,
        stats=training.stats, compile_kwargs=training.compile_kwargs, parts=training.parts,
        parts_per_epoch=training.parts_per_epoch)
    if trained is not model:
        model.set_weights(trained.get_weights())
    reused = dev_scores.outputs_of(stats.get("kept_epoch")) if dev_scores else None
    return stats, reused

"""Multi-label classification on the recipe template: any number of labels per text.

A `BertClassifier(multi_label=True)` (sigmoid outputs, binary cross-entropy) fine-tuned on own
files read by `kbert.data.multi_label` (`label_column` of `label_separator`-joined labels, or
one 0/1 column per label), scored with micro/macro F1 and per-label precision and recall
(`kbert.tasks.multi_label_metrics`). Each label's decision threshold is tuned on the dev data
of the kept epoch and saved in export_settings.json, so the exported SavedModel answers with
every label, its probability and whether it is predicted. Besides the shared layout, it writes
dev_predictions.tsv and test_predictions.tsv: index, texts, (gold,) predicted, p_<label>.
"""

import os

import numpy as np

from kbert.data import multi_label
from kbert.data import pipeline
from kbert.tasks import glue
from kbert.tasks import multi_label_metrics
from kbert.tasks import template


class MultiLabelRecipe(glue.ClassifierRecipe):
    """The single-label classifier recipe with its own data, head, loss and scores; run it
    with `kbert.tasks.template.run(config, MultiLabelRecipe)` (`config.multi_label` set)."""

    def data_files(self, source):
        c, self.settings = self.config, source.settings
        return [(name, getattr(c, name)) for name, step in (
            ("train_file", c.do_train), ("dev_file", c.do_eval), ("test_file", c.do_predict))
            if step]

    def read(self, files):
        c, names, data = self.config, self.config.labels or self.settings.get("label_names"), {}
        for name, path in files:  # train first: its labels name the classes
            labelled = name != "test_file"
            data[name] = multi_label.read_multi_label_file(
                path, c.text_a_column, c.text_b_column, label_separator=c.label_separator,
                label_column=c.label_column if labelled and not c.label_columns else None,
                label_columns=c.label_columns if labelled else None, label_names=names,
                errors="warn" if c.skip_bad_rows else "raise")
            names = names or data[name].label_names
        if not names:
            raise ValueError("pass labels (in id order) to score or predict without training")
        self.labels = tuple(names)
        self.thresholds = np.asarray(self.settings.get("thresholds", [0.5] * len(names)))
        self.dev_outputs = None  # the trained model's dev probabilities, once computed
        return data

    def build_model(self, source, data):
        self.preprocessor = glue.preprocessor(self.config, source)
        return glue.load_classifier(self.config, source, len(self.labels), multi_label=True)

    def training(self, model, data):
        c = self.config
        examples = data["train_file"].sample(c.max_train_examples, seed=c.seed)
        dataset, steps = pipeline.training_epochs(pipeline.tokenize(
            examples, self.preprocessor), examples.label, c.train_batch_size, seed=c.seed)
        if not model.output_dense.bias.numpy().any():  # a new head (a trained one is never 0)
            model.start_at_label_shares(examples.label.mean(axis=0))
        return template.Training(dataset, steps, {
            "task": "multi_label", "examples": len(examples), "labels": list(self.labels)})

    def dev_scorer(self, model, data):
        if not (self.config.keep_best_epoch and "dev_file" in data):
            return None
        return "micro_f1", lambda m: self._scores(data["dev_file"], self._probabilities(
            m, data["dev_file"]), tune=True)

    def export_settings(self, model, data, reused):
        if "dev_file" in data:  # the kept epoch's dev outputs pick the thresholds
            self.dev_outputs = (reused if reused is not None else
                                self._probabilities(model, data["dev_file"]))
            self._scores(data["dev_file"], self.dev_outputs, tune=True)
        c = self.config
        return {"do_lower_case": c.do_lower_case, "max_seq_length": c.max_seq_length,
                "text_pair": c.text_b_column is not None, "label_names": list(self.labels),
                "multi_label": True, "thresholds": [float(t) for t in self.thresholds]}

    def score(self, model, data, output_dir, reused):
        scored, labels = template.Scored(), np.array(self.labels)
        join = self.config.label_separator.join
        for name, split in (("dev_file", "dev"), ("test_file", "test")):
            if name not in data:
                continue
            examples, path = data[name], os.path.join(output_dir, f"{split}_predictions.tsv")
            probabilities = (self.dev_outputs if name == "dev_file" and self.dev_outputs
                             is not None else self._probabilities(model, examples))
            gold = None if examples.label is None else [join(labels[r > 0]) for r in examples.label]
            if gold is not None:
                scored.eval[split] = self._scores(examples, probabilities)[0]
            glue.write_prediction_table(
                path, examples, gold, [join(labels[row >= self.thresholds])
                                       for row in probabilities], self.labels, probabilities)
            scored.predict[split] = path
        return scored

    def _probabilities(self, model, examples):
        logits = glue.predict(model, examples, self.preprocessor, self.config.eval_batch_size)
        return 1 / (1 + np.exp(-np.asarray(logits, np.float64)))

    def _scores(self, examples, probabilities, tune=False):
        """(scores, probabilities), as `DevScores` wants; `tune` first picks the thresholds."""
        if tune:
            self.thresholds = multi_label_metrics.tune_thresholds(examples.label, probabilities)
        return multi_label_metrics.scores(examples.label, probabilities, self.thresholds,
                                          self.labels), probabilities

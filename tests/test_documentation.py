"""The documentation runs: every ```python block of README.md and of the pages in docs/, and the
`Example:` block of every entry point exported from kbert/__init__.py, so none can drift from
the code.

Conventions, for whoever writes a README or docs/ block or an `Example:`:
- A page's blocks (README.md, or one docs/ page) run in page order, each in a fresh namespace
  (a reader copies a block on its own, so it imports what it uses), all in one temporary
  working directory per page: a file that one block writes (an export, a checkpoint) is there
  for the blocks after it.
- That directory is a tiny Google release: a random BERT of TINY_RELEASE_CONFIG's sizes (but 512
  positions) with pretraining heads and BERT's real 30,522-entry uncased vocab, so `vocab.txt`,
  `bert_config.json` and `bert_model.ckpt` are in it, and every Google release name a block
  mentions (anything like `uncased_L-12_H-768_A-12`, `cased_L-24_H-1024_A-16`,
  `chinese_L-12_H-768_A-12`) is a copy of it. `glue/` holds the GLUE fixtures and `conll2003/`
  the CoNLL ones (tests/fixtures). `demo_output/minilm_l6_h384_uncased`, the release that
  `make demo` writes, is the same tiny model without pretraining heads, as MiniLM ships.
  Write outputs to relative paths (`out/...`); an absolute
  path under `/models/` (TensorFlow Serving's layout) is moved into the working directory.
- A block that cannot run offline (a model server, a download) has `<!-- not run: reason -->`
  on the line right before its opening fence. Use it sparingly.
- Docstring examples run alike, each in its own working directory, with the names they use
  but do not define (a model, a dataset, a step count) from `_example_context` below: add a
  name there when an example needs a new one.
"""

import glob
import inspect
import os
import pathlib
import re
import shutil
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.data import squad
from tests.conftest import TINY_RELEASE_CONFIG

ROOT = os.path.join(os.path.dirname(__file__), "..")
DOCS = os.path.join(ROOT, "docs")
DEMO_RELEASE = os.path.join("demo_output", "minilm_l6_h384_uncased")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
RELEASE_NAME = re.compile(r"\b[A-Za-z_]*L-\d+_H-\d+_A-\d+\b")
SERVING_PATH = re.compile(r"""(["'])/models/""")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*\S.*-->\s*$")


def python_blocks(text, start_line=1):
    """(line of the first code line, code, not_run) of every ```python block of `text`."""
    blocks, lines, line = [], text.splitlines(), 0
    while line < len(lines):
        if lines[line].strip() == "```python":
            end = line + 1
            while lines[end].strip() != "```":
                end += 1
            code = textwrap.dedent("\n".join(lines[line + 1:end]))
            not_run = line > 0 and bool(NOT_RUN.match(lines[line - 1].strip()))
            blocks.append((start_line + line + 1, code, not_run))
            line = end
        line += 1
    return blocks


def run_block(code, filename, first_line, namespace, cwd):
    """Runs `code` with the conventions above; tracebacks point at `filename`:`first_line`."""
    for name in set(RELEASE_NAME.findall(code)):
        if not os.path.exists(os.path.join(cwd, name)):
            shutil.copytree(os.path.join(cwd, "_release"), os.path.join(cwd, name))
    code = SERVING_PATH.sub(lambda m: f"{m.group(1)}{cwd}/models/", code)
    exec(compile("\n" * (first_line - 1) + code, filename, "exec"), namespace)  # noqa: S102


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory, minilm_dir):
    """A Google release directory of a random tiny BERT with pretraining heads."""
    directory = tmp_path_factory.mktemp("tiny_release")
    config = kbert.BertConfig(**{**TINY_RELEASE_CONFIG, "vocab_size": 30522,
                                 "max_position_embeddings": 512})
    keras.utils.set_random_seed(0)
    pretrainer = kbert.BertPretrainer(kbert.BertEncoder(**config.encoder_kwargs()))
    kbert.save_google_checkpoint(pretrainer, str(directory / "bert_model.ckpt"),
                                 vocab_file=os.path.join(minilm_dir, "vocab.txt"))
    kbert.save_google_checkpoint(pretrainer.encoder,
                                 str(directory / DEMO_RELEASE / "bert_model.ckpt"),
                                 vocab_file=os.path.join(minilm_dir, "vocab.txt"))
    return str(directory)


@pytest.fixture
def doc_dir(tmp_path, tiny_release, monkeypatch):
    """A working directory laid out as the conventions say; restores Keras' global policy."""
    for name in os.listdir(tiny_release):
        if os.path.isfile(os.path.join(tiny_release, name)):
            shutil.copy(os.path.join(tiny_release, name), tmp_path / name)
    shutil.copytree(os.path.join(tiny_release, DEMO_RELEASE), tmp_path / DEMO_RELEASE)
    shutil.copytree(tiny_release, tmp_path / "_release",
                    ignore=shutil.ignore_patterns("demo_output"))
    shutil.copytree(os.path.join(FIXTURES, "glue"), tmp_path / "glue")
    shutil.copytree(os.path.join(FIXTURES, "conll"), tmp_path / "conll2003")
    monkeypatch.chdir(tmp_path)
    keras.utils.set_random_seed(0)
    yield str(tmp_path)
    keras.config.set_dtype_policy("float32")


def run_page(path, doc_dir):
    """Runs the ```python blocks of the page at `path` (relative to ROOT) as the conventions say."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        blocks = python_blocks(f.read())
    assert blocks, f"{path} has no ```python block"
    for first_line, code, not_run in blocks:
        if not not_run:
            run_block(code, path, first_line, {"__name__": "__doc_page__"}, doc_dir)


def _docs_pages_with_python():
    pages = glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)
    return sorted(os.path.relpath(page, ROOT) for page in pages
                  if "```python" in pathlib.Path(page).read_text(encoding="utf-8"))


@pytest.mark.slow
def test_readme_python_blocks_run(doc_dir):
    run_page("README.md", doc_dir)


@pytest.mark.slow
@pytest.mark.parametrize("page", _docs_pages_with_python())
def test_docs_python_blocks_run(page, doc_dir):
    run_page(page, doc_dir)


def test_docs_pages_with_python_are_found():
    assert {"docs/getting-started.md", "docs/guides/serving.md",
            "docs/guides/formats.md"} <= set(_docs_pages_with_python())


def test_python_blocks_parser():
    text = ("# t\n```python\nx = 1\n```\n<!-- not run: needs a model server -->\n"
            "```python\ny = 2\n```\n```sh\nmake\n```\n  ```python\n  z = 3\n  ```\n")
    assert python_blocks(text) == [(3, "x = 1", False), (7, "y = 2", True), (13, "z = 3", False)]


def _docstring_examples():
    for name in kbert.__all__:
        doc = inspect.getdoc(getattr(kbert, name)) or ""
        if "Example:" in doc:
            source = inspect.getsourcefile(getattr(kbert, name))
            yield pytest.param(name, python_blocks(doc.split("Example:", 1)[1]), source, id=name)


def _classifier_data(preprocessor):
    texts = ["the cat sat on the mat", "a gripping, funny film", "it was dull", "fine"]
    return tf.data.Dataset.from_tensor_slices((texts, [0, 1, 0, 1])).batch(2).map(
        lambda x, y: (preprocessor(x), y))


def _tagger_data(preprocessor):
    inputs = preprocessor(["John lives in Paris", "the cat sat"])
    weights = tf.cast(inputs["padding_mask"], "float32")
    label_ids = tf.zeros_like(inputs["token_ids"])
    return inputs, weights, tf.data.Dataset.from_tensors((inputs, label_ids, weights))


def _squad_features():
    tokenizer = kbert.FullTokenizer("vocab.txt")
    examples = squad.read_squad_examples(
        os.path.join(FIXTURES, "squad_v1.1_dev_excerpt.json"), is_training=True)[:2]
    return squad.convert_examples_to_features(examples, tokenizer, max_seq_length=48,
                                              doc_stride=32, max_query_length=16,
                                              is_training=True)


def _example_context(name):
    """The names an entry point's `Example:` uses without defining them; built in `doc_dir`."""
    context = {"kbert": kbert, "keras": keras, "np": np, "tf": tf, "steps": 2,
               "steps_per_epoch": 2}
    encoder = kbert.BertEncoder.from_google_checkpoint(".")
    preprocessor = kbert.BertPreprocessor("vocab.txt", max_seq_length=16)
    inputs = preprocessor(["the cat sat on the mat", "hello"])
    context.update(encoder=encoder, preprocessor=preprocessor,
                   classifier=kbert.BertClassifier(encoder, num_classes=2),
                   ids=inputs["token_ids"], segments=inputs["segment_ids"],
                   mask=inputs["padding_mask"], encoder_inputs=inputs,
                   positions=tf.constant([[1, 2], [1, 0]]))
    if name == "BertClassifier":
        context["train_ds"] = _classifier_data(preprocessor)
    if name == "BertTokenClassifier":
        context["inputs"], context["label_weights"], context["train_ds"] = (
            _tagger_data(preprocessor))
    if name == "BertSpanLabeler":
        context["features"] = _squad_features()
    if name in ("load_model", "convert"):  # a recipe's output directory, head included
        kbert.save_google_checkpoint(context["classifier"], "mrpc_output/bert_model.ckpt",
                                     vocab_file="vocab.txt")
    return context


@pytest.mark.slow
@pytest.mark.parametrize("name, blocks, source", list(_docstring_examples()))
def test_docstring_examples_run(name, blocks, source, doc_dir):
    assert blocks, f"{name}: `Example:` has no ```python block"
    for _, code, not_run in blocks:
        if not not_run:
            namespace = _example_context(name)
            run_block(code, f"{source} ({name} Example)", 1, namespace, doc_dir)

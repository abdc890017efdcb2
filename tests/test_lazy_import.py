"""`import kbert` starts no TensorFlow, yet every public name resolves and Keras finds kbert's
classes in .keras files (kbert.lazy, kbert.keras_registration). Each check needs a fresh
process: this one imported TensorFlow long ago."""

import ast
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

import kbert
import kbert.data
from kbert import keras_registration
from tests import fresh_process
from tests.limits import SUBPROCESS_TIMEOUT

KBERT = pathlib.Path(kbert.__file__).parent


def _python(code, cwd=None):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=cwd, timeout=SUBPROCESS_TIMEOUT, env=fresh_process.environment())
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.split()


def test_import_kbert_starts_no_tensorflow_and_every_name_resolves():
    out = _python(
        "import sys, kbert, kbert.data, kbert.options, kbert.ranges, kbert.tasks.configs\n"
        "print(*sorted(name for name in ('tensorflow', 'keras') if name in sys.modules))\n"
        "print('|', kbert.__version__, set(kbert.__all__) <= set(dir(kbert)),\n"
        "      set(kbert.data.__all__) <= set(dir(kbert.data)))\n"
        "print(kbert.BertClassifier.__module__, kbert.data.PRETRAINING_FEATURES is not None)")
    assert out == ["|", kbert.__version__, "True", "True", "kbert.models.classifier", "True"]


def test_every_public_name_resolves():
    for package in (kbert, kbert.data):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
    with pytest.raises(AttributeError, match="no attribute 'BertClasifier'"):
        kbert.BertClasifier  # noqa: B018


@pytest.fixture(scope="module")
def tiny_classifier_file(tmp_path_factory):
    from tests.conftest import TINY_CONFIG

    keras.utils.set_random_seed(0)
    encoder = kbert.BertEncoder(**kbert.BertConfig(**TINY_CONFIG).encoder_kwargs())
    model = kbert.BertClassifier(encoder, num_classes=2)
    model({"token_ids": np.ones((1, 4), "int32"), "segment_ids": np.zeros((1, 4), "int32"),
           "padding_mask": np.ones((1, 4), "int32")})
    path = tmp_path_factory.mktemp("lazy") / "classifier.keras"
    model.save(path)
    return path


@pytest.mark.parametrize("imports", [
    "import kbert; import keras",  # Keras imported after kbert: the finder registers
    # A kbert module imports Keras (registered once no kbert module is half imported).
    "import kbert.tokenization; import keras",
    # Keras first imported by keras-hub, half imported itself, inside keras-nlp's import:
    # registered once both are whole (kbert's modules import keras-nlp, it imports keras-hub).
    "import kbert; import keras_nlp; import keras",
])
def test_keras_loads_a_kbert_model_after_import_kbert(tiny_classifier_file, imports):
    out = _python(f"{imports}\nprint(type(keras.saving.load_model({str(tiny_classifier_file)!r},"
                  " compile=False)).__name__)")
    assert out[-1:] == ["BertClassifier"]


def test_the_registration_list_names_every_module_with_registered_classes():
    registering = set()
    for path in KBERT.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        if any(isinstance(node, ast.Attribute) and node.attr == "register_keras_serializable"
               for node in ast.walk(ast.parse(source))):
            registering.add(".".join(path.relative_to(KBERT.parent).with_suffix("").parts))
    assert registering == set(keras_registration.MODULES)

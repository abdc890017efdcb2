"""tools/export_saved_model.py: a smoke run on a tiny Google checkpoint, and its errors."""

import importlib.util
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import app
from absl import flags

from tests.limits import SUBPROCESS_TIMEOUT

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "export_saved_model.py")


@pytest.fixture(scope="module")
def tool():
    """The tool's module, imported once (its flags are global), for in-process error runs."""
    spec = importlib.util.spec_from_file_location("export_saved_model_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def run(*args):
        flags.FLAGS.unparse_flags()
        argv = flags.FLAGS([TOOL, *args])
        module.main(argv)

    yield run
    flags.FLAGS.unparse_flags()


def test_exports_a_google_checkpoint(tiny_google_dir, tmp_path):
    export_dir = tmp_path / "encoder" / "1"
    result = subprocess.run([sys.executable, TOOL, f"--model={tiny_google_dir}",
                             f"--export_dir={export_dir}", "--max_seq_length=8"],
                            capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Exported BertEncoder to" in result.stderr
    assert os.listdir(export_dir / "assets") == ["vocab.txt"]
    assert sorted(os.listdir(tmp_path / "encoder")) == ["1"]  # no temporary directory left
    serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    outputs = serve(text=tf.constant(["he said that it was " * 3, ""]))
    assert outputs["sequence_output"].shape == (2, 8, 12)  # truncated to --max_seq_length
    assert outputs["tokens"].numpy()[1].tolist()[:3] == [b"[CLS]", b"[SEP]", b""]
    assert np.isfinite(outputs["pooled_output"].numpy()).all()


def test_refuses_a_non_empty_dir(tool, tiny_google_dir, tmp_path):
    (tmp_path / "old.txt").write_text("keep")
    with pytest.raises(app.UsageError, match="is not empty; pass overwrite=True"):
        tool(f"--model={tiny_google_dir}", f"--export_dir={tmp_path}")
    assert os.listdir(tmp_path) == ["old.txt"]


def test_unknown_model_type(tool, tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.save(tmp_path / "dense.keras")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    with pytest.raises(app.UsageError,
                       match="cannot export a Sequential; expected one of BertSpanLabeler"):
        tool(f"--model={tmp_path / 'dense.keras'}", f"--export_dir={tmp_path / 'out'}")
    with pytest.raises(app.UsageError, match="Unexpected arguments"):
        tool(f"--model={tmp_path / 'dense.keras'}", f"--export_dir={tmp_path / 'out'}", "x")
    assert not (tmp_path / "out").exists()


def test_compute_dtype_bfloat16(tool, tiny_google_dir, tmp_path):
    tool(f"--model={tiny_google_dir}", f"--export_dir={tmp_path / 'fp32'}", "--max_seq_length=8")
    tool(f"--model={tiny_google_dir}", f"--export_dir={tmp_path / 'bf16'}", "--max_seq_length=8",
         "--compute_dtype=bfloat16")
    texts = tf.constant(["he said that it was", "the end"])
    full, half = (tf.saved_model.load(str(tmp_path / name)).signatures["serving_default"](
        text=texts)["pooled_output"].numpy() for name in ("fp32", "bf16"))
    assert half.dtype == np.float32
    np.testing.assert_allclose(half, full, atol=0.05)  # bfloat16 rounding, not another model
    assert not np.array_equal(half, full)  # and it did compute in bfloat16

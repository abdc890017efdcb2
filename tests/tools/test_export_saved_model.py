"""tools/export_saved_model.py: a smoke run on a tiny Google checkpoint, and its errors."""

import functools
import os

import keras
import numpy as np
import tensorflow as tf

from tests.tools.runner import run_tool
from tests.tools.runner import run_tool_in_subprocess

run = functools.partial(run_tool, "export_saved_model.py")


def test_exports_a_google_checkpoint(tiny_google_dir, tmp_path):
    """The real entry point, in a fresh process; the other tests run the tool in-process."""
    export_dir = tmp_path / "encoder" / "1"
    result = run_tool_in_subprocess("export_saved_model.py", f"--model={tiny_google_dir}",
                                    f"--export_dir={export_dir}", "--max_seq_length=8")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Exported BertEncoder to" in result.stderr
    assert os.listdir(export_dir / "assets") == ["vocab.txt"]
    assert sorted(os.listdir(tmp_path / "encoder")) == ["1"]  # no temporary directory left
    serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    outputs = serve(text=tf.constant(["he said that it was " * 3, ""]))
    assert outputs["sequence_output"].shape == (2, 8, 12)  # truncated to --max_seq_length
    assert outputs["tokens"].numpy()[1].tolist()[:3] == [b"[CLS]", b"[SEP]", b""]
    assert np.isfinite(outputs["pooled_output"].numpy()).all()


def test_refuses_a_non_empty_dir(tiny_google_dir, tmp_path):
    (tmp_path / "old.txt").write_text("keep")
    result = run(f"--model={tiny_google_dir}", f"--export_dir={tmp_path}")
    assert result.returncode == 2 and "is not empty" in result.stderr, result.stderr[-2000:]
    assert os.listdir(tmp_path) == ["old.txt"]


def test_unknown_model_type(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.save(tmp_path / "dense.keras")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    result = run(f"--model={tmp_path / 'dense.keras'}", f"--export_dir={tmp_path / 'out'}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "cannot export a Sequential; expected one of BertSpanLabeler" in result.stderr
    result = run(f"--model={tmp_path / 'dense.keras'}", f"--export_dir={tmp_path / 'out'}", "x")
    assert result.returncode == 2 and "Unexpected arguments" in result.stderr
    assert not (tmp_path / "out").exists()


def test_compute_dtype_bfloat16(tiny_google_dir, tmp_path):
    for name, dtype in (("fp32", "float32"), ("bf16", "bfloat16")):
        result = run(f"--model={tiny_google_dir}", f"--export_dir={tmp_path / name}",
                     "--max_seq_length=8", f"--compute_dtype={dtype}")
        assert result.returncode == 0, result.stderr[-3000:]
    texts = tf.constant(["he said that it was", "the end"])
    full, half = (tf.saved_model.load(str(tmp_path / name)).signatures["serving_default"](
        text=texts)["pooled_output"].numpy() for name in ("fp32", "bf16"))
    assert half.dtype == np.float32
    np.testing.assert_allclose(half, full, atol=0.05)  # bfloat16 rounding, not another model
    assert not np.array_equal(half, full)  # and it did compute in bfloat16


def test_unwritable_export_parent_is_refused_before_loading(tiny_google_dir, tmp_path,
                                                           monkeypatch):
    # os.access says no, as for a read-only mount or another user's directory (chmod does not
    # stop root, who runs some CI).
    locked = str(tmp_path / "locked")
    os.mkdir(locked)
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kwargs: (
        os.fspath(path) != locked and access(path, mode, **kwargs)))
    result = run(f"--model={tiny_google_dir}", f"--export_dir={locked}/encoder/1")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert lines == [f"error: {locked}: cannot write here (Permission denied) — choose a "
                     "writable directory or change its permissions"]
    assert "Loaded" not in result.stderr

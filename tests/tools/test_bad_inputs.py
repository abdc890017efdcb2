"""Bad inputs given to the tools as a user gives them: exit status 2, one line naming the file."""

import json
import os
import subprocess
import sys

from tests.data.test_squad import SPECIAL
from tests.tasks.test_squad import WORDS
from tests.tasks.test_squad import _data

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.path.join(ROOT, "tools")
# The tools import this checkout's kbert, not another one installed in the environment.
ENV = dict(os.environ, PYTHONPATH=ROOT)


def run(tool, *args):
    return subprocess.run([sys.executable, os.path.join(TOOLS, tool), *args],
                          capture_output=True, text=True, timeout=300, env=ENV)


def one_error_line(result):
    """The single stderr line of a failed run (no traceback, no help listing)."""
    assert result.returncode == 2, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if not line.startswith("I")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    return lines[0]


def test_malformed_squad_files(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL + WORDS + list("()-.,?")) + "\n")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(
        vocab_size=len(SPECIAL + WORDS) + 6, hidden_size=12, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=20, hidden_act="gelu",
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=48,
        type_vocab_size=2, initializer_range=0.02)))
    not_squad = tmp_path / "not_squad.json"
    not_squad.write_text(json.dumps({"version": "1.1", "articles": []}))
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("id\tquestion\n1\twhen?\n")
    misplaced = _data()
    for paragraph in misplaced["data"][0]["paragraphs"]:
        for qa in paragraph["qas"]:
            qa["answers"][0]["answer_start"] += 1
    misplaced_file = tmp_path / "misplaced.json"
    misplaced_file.write_text(json.dumps(misplaced))
    common = [f"--vocab_file={tmp_path / 'vocab.txt'}",
              f"--bert_config_file={tmp_path / 'bert_config.json'}",
              "--max_seq_length=40", "--doc_stride=12", "--max_query_length=8",
              "--train_batch_size=4"]

    line = one_error_line(run("run_squad.py", "--do_train", f"--train_file={not_squad}",
                              f"--output_dir={tmp_path}/out1", *common))
    assert line.startswith(f"error: {not_squad}: not SQuAD: found an object with keys "
                           "['articles', 'version'] — expected SQuAD JSON: {\"data\"")
    line = one_error_line(run("run_squad.py", "--do_predict", f"--predict_file={tsv}",
                              f"--output_dir={tmp_path}/out2", *common))
    assert line.startswith(f"error: {tsv}:1: not JSON (")
    line = one_error_line(run("run_squad.py", "--do_train", f"--train_file={misplaced_file}",
                              f"--output_dir={tmp_path}/out3", *common))
    assert line.startswith(f"error: {misplaced_file}: none of the 14 training question(s) has a "
                           "usable answer")
    # Nothing was trained or written before the error.
    for out in ("out1", "out2", "out3"):
        assert not os.path.exists(tmp_path / out) or not os.listdir(tmp_path / out)

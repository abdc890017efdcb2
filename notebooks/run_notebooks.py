"""Re-executes the notebooks on the real data and MiniLM weights; rewrites their outputs in place.

`make notebooks` runs this. Each notebook runs top to bottom in a fresh kernel whose working
directory is notebooks/, with its data variables pointing into `--data_dir` and a temporary
work directory. The outputs are rewritten only when every cell succeeded; machine paths in them
are replaced by placeholders (`<work_dir>`, `<data_dir>`, `<repo>`, `<python>`), and the
start-up lines of TensorFlow's C++ log (oneDNN, no CUDA driver) are dropped. The first cell of
each notebook is then a note of when, where and how long the run took.

    python notebooks/run_notebooks.py [--data_dir=../shared/data] [glue ner ...]
"""

import argparse
import datetime
import os
import platform
import re
import sys
import tempfile
import time

import nbformat
from nbclient import NotebookClient

NOTEBOOKS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(NOTEBOOKS_DIR)
# name -> {environment variable: path under --data_dir}
DATA = {
    "glue": {"KBERT_GLUE_DIR": "glue/MRPC"},
    "ner": {"KBERT_CONLL_DIR": "conll2003"},
    "squad": {"KBERT_SQUAD_FILE": "squad/v1.1/dev.json"},
    "vocab_expansion": {},
    "chinese": {"KBERT_CHNSENTICORP_DIR": "chinese/ChnSentiCorp"},
}
RUN_INFO_TAG = "run-info"
MAX_OUTPUT_BYTES = 400_000  # one image or text output; a notebook stays readable on GitHub
# Start-up notes of TensorFlow's C++ log and of tqdm, the same on every CPU-only machine.
_NOISE = re.compile(r"^([IWE]\d{4} [\d:.]+ +\d+ \S+:\d+\] .*|WARNING: All log "
                    r"messages before absl::InitializeLog\(\) is called are written to STDERR|"
                    r".*TqdmWarning: IProgress not found.*|  from \.autonotebook import .*)\n?",
                    re.MULTILINE)
# Variables that would turn a real run into a test run.
_CLEARED = ("KBERT_NOTEBOOK_TINY", "KBERT_CHECKPOINT", "KBERT_RELEASE_DIR", "KBERT_WORK_DIR")


def machine():
    """The CPU model, the cores this process may use and the load when the run started."""
    model = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        model = names[0] if names else model
    return (f"{model}, {len(os.sched_getaffinity(0))} CPU cores shared with other jobs (load "
            f"average {os.getloadavg()[0]:.1f} at the start), no GPU")


def scrub(text, replacements):
    for path, placeholder in replacements:
        text = text.replace(path, placeholder)
    return text


def clean_outputs(notebook, replacements):
    """Replaces machine paths in every output, drops log noise from stderr, and rejects
    outputs over `MAX_OUTPUT_BYTES`."""
    for cell in notebook.cells:
        if "outputs" not in cell:
            continue
        for output in cell.outputs:
            if output.get("name") == "stderr":
                output["text"] = _NOISE.sub("", output["text"])
            if "text" in output:
                output["text"] = scrub(output["text"], replacements)
            for mime, value in output.get("data", {}).items():
                if isinstance(value, str) and not mime.startswith("image/"):
                    output["data"][mime] = scrub(value, replacements)
                if len(str(value)) > MAX_OUTPUT_BYTES:
                    raise ValueError(f"an output of {len(str(value)):,} bytes ({mime}) in "
                                     f"{cell.source[:60]!r}...")
        cell.outputs = [o for o in cell.outputs if o.get("text", True)]


def run_info_cell(started, seconds):
    text = (f"*The outputs below are from `make notebooks` on {started:%Y-%m-%d %H:%M} UTC: "
            f"{machine()}; {seconds / 60:.1f} minutes of wall time. The budget (subset, epochs, "
            f"sequence length) is printed by the parameters cell. Results from such a budget "
            f"are a smoke test of the recipe, not the model's best scores.*")
    return nbformat.v4.new_markdown_cell(text, metadata={"tags": [RUN_INFO_TAG]})


def execute(name, data_dir, work_root):
    path = os.path.join(NOTEBOOKS_DIR, f"{name}.ipynb")
    notebook = nbformat.read(path, as_version=4)
    if notebook.cells and RUN_INFO_TAG in notebook.cells[0].metadata.get("tags", []):
        notebook.cells.pop(0)
    work_dir = os.path.join(work_root, name)
    for key in _CLEARED:
        os.environ.pop(key, None)
    os.environ.update({key: os.path.join(data_dir, sub) for key, sub in DATA[name].items()})
    os.environ["KBERT_WORK_DIR"] = work_dir
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no oneDNN/CUDA start-up notes
    started, start = datetime.datetime.now(datetime.UTC), time.monotonic()
    NotebookClient(notebook, timeout=1800, kernel_name="python3",
                   resources={"metadata": {"path": NOTEBOOKS_DIR}}).execute()
    seconds = time.monotonic() - start
    clean_outputs(notebook, [(work_dir, "<work_dir>"), (work_root, "<work_dir>"),
                             (data_dir, "<data_dir>"), (REPO_DIR, "<repo>"),
                             (sys.prefix, "<python>"), (os.path.expanduser("~"), "~")])
    notebook.cells.insert(0, run_info_cell(started, seconds))
    tmp = path + ".tmp"
    nbformat.write(notebook, tmp)
    os.replace(tmp, path)
    print(f"{name}: {seconds / 60:.1f} min, outputs written to {path}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", default=os.path.join(REPO_DIR, "..", "shared", "data"))
    parser.add_argument("names", nargs="*", help=f"notebooks to run, of {list(DATA)} (all)")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(DATA))
    if unknown:
        parser.error(f"unknown notebooks {unknown}; known: {list(DATA)}")
    data_dir = os.path.realpath(args.data_dir)
    if not os.path.isdir(data_dir):
        sys.exit(f"{data_dir}: no such directory; pass --data_dir (see the README)")
    with tempfile.TemporaryDirectory(prefix="kbert_notebooks_") as work_root:
        for name in args.names or list(DATA):
            execute(name, data_dir, work_root)


if __name__ == "__main__":
    main()

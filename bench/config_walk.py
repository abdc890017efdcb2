"""How far a reader walks to follow a recipe's `config` through kbert (issue 48's measure).

Runs a checkout's tools/run_classifier.py on a tiny MRPC run (a random 2-layer BERT, the
8-example fixture, one epoch, train + eval) under `sys.setprofile`, and records every call of
a function in the checkout's kbert/ that takes a recipe config (an instance of the first
`kbert.tasks` dataclass named *Config that a kbert function is given) as an argument:

    stops    the distinct kbert functions that take it
    files    the distinct files they are in
    returns  how often the walk, in call order, comes back to a file it had left
    climbs   the calls into a file that is already on the stack above the caller (the
             callee climbs back up to a module that called down to it: a template calling
             a recipe's hook, a helper calling back into its caller's module)

    python -m bench.config_walk --repo=/tmp/old_checkout --output=walk_old.json

--repo is put first on PYTHONPATH (a `git worktree` of an older commit measures that one; one
whose `kbert.__version__` reads the package metadata of a "kbert" distribution needs a
kbert-0.dist-info/METADATA on PYTHONPATH as well).
"""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

_REPO = flags.DEFINE_string("repo", os.getcwd(), "The checkout to measure.")
_OUTPUT = flags.DEFINE_string("output", None, "Write the walk as JSON here.")
_CHILD = flags.DEFINE_string("child", None, "internal: the release directory to walk with.")

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(HERE, "tests", "fixtures", "glue")


def _tiny_release(directory):
    """A random 2-layer BERT as a Google release, with the GLUE fixtures' vocab."""
    import keras

    import kbert
    from tests import conftest

    vocab = os.path.join(directory, "tiny_vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.writelines(token + "\n" for token in conftest.TINY_VOCAB)
    keras.utils.set_random_seed(0)
    encoder = kbert.BertEncoder(**kbert.BertConfig(**conftest.TINY_CONFIG).encoder_kwargs())
    kbert.save_google_checkpoint(encoder, os.path.join(directory, "bert_model.ckpt"),
                                 vocab_file=vocab)
    os.remove(vocab)


class Walk:
    """Records the calls of kbert functions under `root` that take a config."""

    def __init__(self, root):
        self.root, self.config_class, self.calls = root, None, []

    def profile(self, frame, event, arg):
        if event != "call" or not frame.f_code.co_filename.startswith(self.root):
            return
        code = frame.f_code
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(name) for name in names]
        if self.config_class is None:
            self.config_class = next((type(v) for v in values if _is_recipe_config(v)), None)
        if self.config_class and any(isinstance(v, self.config_class) for v in values):
            self.calls.append((self._path(frame), code.co_qualname, self._climbs(frame)))

    def _path(self, frame):
        return os.path.relpath(frame.f_code.co_filename, os.path.dirname(self.root))

    def _climbs(self, frame):
        """Whether `frame`'s file is on the stack above its caller's file (kbert frames)."""
        files = []
        caller = frame.f_back
        while caller is not None:
            if caller.f_code.co_filename.startswith(self.root):
                files.append(self._path(caller))
            caller = caller.f_back
        here = self._path(frame)
        above = files[1:] if files and files[0] != here else []
        return here in above

    def summary(self):
        files = [path for path, _, _ in self.calls]
        order = [path for i, path in enumerate(files) if i == 0 or path != files[i - 1]]
        stops = {(path, name) for path, name, _ in self.calls}
        climbs = sorted({f"{path}:{name}" for path, name, climb in self.calls if climb})
        return {"config_class": self.config_class.__name__, "stops": len(stops),
                "files": len(set(files)), "climbs": len(climbs),
                "returns": sum(path in order[:i] for i, path in enumerate(order)),
                "file_order": order, "climbing_functions": climbs,
                "functions": sorted(f"{path}:{name}" for path, name in stops)}


def _is_recipe_config(value):
    return (dataclasses.is_dataclass(value) and not isinstance(value, type)
            and type(value).__module__.startswith("kbert.tasks")
            and type(value).__name__.endswith("Config"))


def _walk(release):
    """The walk of tools/run_classifier.py's main on a tiny MRPC run in this process."""
    import importlib.util

    repo = os.path.realpath(_REPO.value)  # before the tool's argv replaces the flags
    spec = importlib.util.spec_from_file_location(
        "run_classifier", os.path.join(repo, "tools", "run_classifier.py"))
    tool = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(spec.origin))  # older tools import their neighbours
    spec.loader.exec_module(tool)  # defines its flags; parse them from a fresh argv
    # Older tools define `main` themselves; today's are shims over kbert.cli.
    main_fn = getattr(tool, "main", None) or tool.run_classifier.main
    out = tempfile.mkdtemp()
    argv = ["run_classifier", "--task_name=MRPC", f"--data_dir={FIXTURES}/MRPC",
            f"--init_checkpoint={release}", f"--output_dir={out}/run", "--do_train",
            "--do_eval", "--num_train_epochs=1", "--train_batch_size=4",
            "--max_seq_length=16"]
    flags.FLAGS.unparse_flags()
    flags.FLAGS(argv)
    walk = Walk(os.path.join(repo, "kbert"))
    sys.setprofile(walk.profile)
    try:
        main_fn(argv[:1])
    finally:
        sys.setprofile(None)
    return walk.summary()


def main(argv):
    del argv
    if _CHILD.value:
        print(json.dumps(_walk(_CHILD.value)))
        return
    with tempfile.TemporaryDirectory() as release:
        _tiny_release(release)
        # A child process whose kbert is the one in --repo.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [_REPO.value] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        result = subprocess.run(
            [sys.executable, os.path.abspath(__file__), f"--repo={_REPO.value}",
             f"--child={release}"], env=env, check=True, capture_output=True, text=True)
    walk = json.loads(result.stdout.strip().splitlines()[-1])
    print(json.dumps({k: walk[k] for k in ("config_class", "stops", "files", "climbs",
                                           "returns")}))
    if _OUTPUT.value:
        with open(_OUTPUT.value, "w", encoding="utf-8") as f:
            json.dump(walk, f, indent=1)


if __name__ == "__main__":
    app.run(main)

"""Registers kbert's Keras classes as soon as Keras is imported, so that `import kbert` is light.

A `.keras` file names kbert's classes ("kbert>BertClassifier"), and Keras finds them only among
registered classes: `keras.saving.register_keras_serializable` runs when a class's module is
imported, and Keras imports modules by name for its own packages only
(`serialization_lib._retrieve_class_or_fn`). So `import kbert; import keras;
keras.saving.load_model("model.keras")` works only if `MODULES` are imported by then; but they
import TensorFlow, which `import kbert` must not start (seconds, and no tool's --help needs it).

Keras has no hook for a class it does not find, hence a finder on `sys.meta_path`: once Keras
is imported (by the user, by a kbert module, or by a package such as keras-nlp or TensorFlow
that imports it) it imports `MODULES`, at the first moment no kbert module and no top-level
package is half imported (from inside one, a module of `MODULES` that imports it would find it
half defined: a circular import; keras-nlp's import of keras-hub, say, when Keras was first
imported by keras-hub), and then removes itself. Keras' saving is mended
then too (`kbert.keras_fixes`).
"""

import importlib
import sys

from kbert import keras_fixes

# The modules of kbert's registered Keras classes (tests/test_lazy_import.py checks the list).
MODULES = (
    "kbert.layers.crf", "kbert.layers.embeddings", "kbert.layers.token_id_check",
    "kbert.layers.transformer", "kbert.models.classifier", "kbert.models.encoder",
    "kbert.models.pretrainer", "kbert.models.span_labeler", "kbert.models.token_classifier",
    "kbert.tasks.optimization", "kbert.tokenization.preprocessor",
)


def install():
    """Registers the classes now if Keras is imported, else as soon as it is."""
    if "keras" in sys.modules:
        _register()
    elif not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _register():
    keras_fixes.install()
    for module in MODULES:
        importlib.import_module(module)


class _Finder:  # a sys.meta_path finder (importlib.abc.MetaPathFinder: a slow import)
    """Finds Keras, kbert's modules and top-level packages as the next finders do, with a
    `_Loader` around theirs."""

    def __init__(self):
        self.depth = 0  # modules it found being executed, one inside another

    def find_spec(self, name, path, target=None):
        if "." in name and not name.startswith("kbert."):
            return None  # Keras, kbert's modules and every top-level package are watched
        for finder in sys.meta_path[sys.meta_path.index(self) + 1:]:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self)
                return spec
        return None

    def imported(self):
        """Called after each module it found: registers once Keras is in and nothing is half."""
        if self.depth == 0 and "keras" in sys.modules and self in sys.meta_path:
            sys.meta_path.remove(self)
            _register()


class _Loader:  # an importlib.abc.Loader
    """A module's own loader, telling the finder when the module is executed."""

    def __init__(self, loader, finder):
        self.loader, self.finder = loader, finder

    def __getattr__(self, name):  # get_source, get_resource_reader, ...: the module's loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.finder.depth += 1
        try:
            self.loader.exec_module(module)
        finally:
            self.finder.depth -= 1
        self.finder.imported()

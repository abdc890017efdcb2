"""A package's public names, imported from their modules when first read (PEP 562).

Most of kbert's modules import TensorFlow, which takes seconds to start; `import kbert` and the
tools' --help must not wait for it. So a package lists its public names once, as imports under
`if typing.TYPE_CHECKING:` (what type checkers, IDEs and the API reference read), and `attach`
gives it a `__getattr__` that imports a name's module when the name is first read. By hand:
the `lazy_loader` package does the same from a .pyi stub, but is not a dependency of kbert.
"""

import ast
import importlib
import sys


def attach(package):
    """`__getattr__` and `__dir__` for a package, from its `if typing.TYPE_CHECKING:` imports.

    Args:
        package: str. The package's name (its `__name__`).

    Returns:
        (`__getattr__`, `__dir__`), to assign in the package's `__init__.py`.
    """
    namespace = sys.modules[package].__dict__
    exports = _type_checking_imports(namespace["__file__"])

    def __getattr__(name):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value  # later reads find it without __getattr__
        return value

    def __dir__():
        return sorted({*namespace, *exports})

    return __getattr__, __dir__


def _type_checking_imports(path):
    """{name: module} of the `from module import name` lines under `if typing.TYPE_CHECKING:`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and ast.unparse(node.test) == "typing.TYPE_CHECKING")
    return {alias.asname or alias.name: node.module for node in block.body
            for alias in node.names}

"""The command-line tools, installed as commands (`kbert-run-classifier`, ...; setup.cfg).

Each tool is a module with `main(argv)` and `run()`, the command's entry point;
`tools/<name>.py` runs it from a clone. A tool's module imports only absl, this package,
`kbert.options`, `kbert.ranges` and `kbert.tasks.configs`: its --help starts no TensorFlow.
"""

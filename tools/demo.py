"""The `kbert-demo` command (kbert.cli.demo), from a clone:

    python tools/demo.py --help
"""

from kbert.cli import demo

if __name__ == "__main__":
    demo.run()

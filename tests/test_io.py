import os
import subprocess
import sys

from kbert import io


def test_remove_stale_temporaries_keeps_live_writers(tmp_path):
    with io.atomic_files(tmp_path) as live:
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout.strip()
        stale = tmp_path / os.path.basename(live).replace(f"-{os.getpid()}-", f"-{dead}-")
        stale.mkdir()
        legacy = tmp_path / ".kbert-tmp-ab12cd34"
        legacy.mkdir()
        (tmp_path / ".kbert-tmp-otherhost-1-xyz").mkdir()
        assert sorted(io.remove_stale_temporaries(tmp_path)) == sorted([str(legacy), str(stale)])
        assert os.path.isdir(live)
    assert sorted(os.listdir(tmp_path)) == [".kbert-tmp-otherhost-1-xyz"]

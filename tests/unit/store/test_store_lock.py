import os
import random
import subprocess
import sys

import pytest

from raftlog.store.errors import StoreLockedError
from raftlog.store.store_lock import AbortMarker, StoreLock
from tests.support import REPO_ROOT
from tests.support.sim_filesystem import SimFileSystem

_TRY_LOCK = """
import sys
from raftlog.store.errors import StoreLockedError
from raftlog.store.store_lock import StoreLock
try:
    StoreLock(sys.argv[1]).acquire()
except StoreLockedError as error:
    print(error)
    sys.exit(3)
print("acquired")
"""


def try_lock_in_another_process(root_dir: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _TRY_LOCK, root_dir],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )


def test_a_second_process_is_refused_while_the_lock_is_held(tmp_path) -> None:
    root = str(tmp_path / "store")
    with StoreLock(root) as lock:
        assert lock.held
        refused = try_lock_in_another_process(root)
        assert refused.returncode == 3, refused.stderr
        assert os.path.join(root, "lock") in refused.stdout
    # Released: another process may now take it.
    allowed = try_lock_in_another_process(root)
    assert allowed.returncode == 0, allowed.stderr
    assert "acquired" in allowed.stdout


def test_a_second_lock_in_the_same_process_is_refused_too(tmp_path) -> None:
    first = StoreLock(str(tmp_path))
    first.acquire()
    first.acquire()  # idempotent for its holder
    with pytest.raises(StoreLockedError, match="in use"):
        StoreLock(str(tmp_path)).acquire()
    first.release()
    StoreLock(str(tmp_path)).acquire()


def test_abort_marker_tells_a_crash_from_a_clean_stop() -> None:
    fs = SimFileSystem()
    first_run = AbortMarker(fs, "/store")
    assert not first_run.was_unclean_stop()
    first_run.create()
    assert not first_run.was_unclean_stop()
    # Crash: the marker stays, durably.
    fs.power_loss(random.Random(0))
    second_run = AbortMarker(fs, "/store")
    assert second_run.was_unclean_stop()
    second_run.create()
    assert second_run.was_unclean_stop()
    second_run.remove()
    fs.power_loss(random.Random(0))
    third_run = AbortMarker(fs, "/store")
    third_run.create()
    assert not third_run.was_unclean_stop()

"""A Library opens without importing LanceDB's REST namespace client whole, and code that uses
that client still gets all of it (vidagent.library.lance)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Run in a fresh interpreter: this test process may have imported LanceDB already.
CODE = """
import sys, threading
from vidagent.library import Library

library = Library(sys.argv[1])
library.list_videos()  # connects: LanceDB is imported here
assert "lancedb" in sys.modules
print("api imported at open:", "lance_namespace_urllib3_client.api" in sys.modules)

got = []
def read():
    import lance_namespace_urllib3_client as client
    got.append((client.ApiClient.__name__, client.TableApi.__name__))
threads = [threading.Thread(target=read) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("read by every thread:", got == [("ApiClient", "TableApi")] * 4)
from lance_namespace_urllib3_client.api.table_api import TableApi
import lance_namespace_urllib3_client as client
print("the same class:", client.TableApi is TableApi)
"""


def test_a_library_opens_without_the_rest_clients_api_and_the_client_still_loads_whole(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CODE, str(tmp_path / "lib")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "api imported at open: False",
        "read by every thread: True",
        "the same class: True",
    ]

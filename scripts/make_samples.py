"""Write the bundled sample change feeds (samples/) from the test event builders."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from debezium_events import sample_files  # noqa: E402

out = ROOT / "samples" / "debezium" / "inventory"
out.mkdir(parents=True, exist_ok=True)
for name, lines in sample_files().items():
    (out / name).write_text("\n".join(lines) + "\n")
    print(f"wrote {out / name} ({len(lines)} records)")

"""Check that Java 17+ is available for PySpark, and say how to get it if not.

PySpark 4 needs a Java 17 (or newer) runtime. The check is informative until the Spark
pipeline lands; it never installs anything itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys


def java_major_version() -> int | None:
    java = shutil.which("java")
    if java is None:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def main() -> int:
    version = java_major_version()
    if version is not None and version >= 17:
        return 0
    found = "no java on PATH" if version is None else f"found Java {version}"
    print(
        f"delta-ops: PySpark needs Java 17 or newer ({found}).\n"
        "  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless\n"
        "  macOS:         brew install openjdk@17\n"
        "Then make sure `java -version` reports 17 or newer (or set JAVA_HOME).",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())

"""The `flashgen` console command that pip installs: it runs the CLI executable
built into the wheel (flashgen/_lib/bin/flashgen), the same program and
subcommands as the CMake build's build/flashgen. The process is replaced by
the executable, so exit codes, signals and output are the tool's own."""

from __future__ import annotations

import os
import sys

from . import _library


def main() -> None:
    try:
        executable = _library.find_cli()
    except OSError as error:
        sys.stderr.write(f"flashgen: {error}\n")
        sys.exit(2)
    os.execv(executable, [str(executable), *sys.argv[1:]])


if __name__ == "__main__":
    main()

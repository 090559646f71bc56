"""__main__.py — `python3 -m lab ...` runs the lab's command line (lab.cli.main)."""

import sys

from lab.cli import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m vflfs.report <root> ...``: the same as ``vflfs report <root> ...``."""

import sys

from vflfs.report.cli import main

sys.exit(main())

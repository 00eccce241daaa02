"""``python -m pytest_benchaudit.cli``: the ``benchaudit`` command."""

import sys

from pytest_benchaudit.cli.app import main

sys.exit(main())

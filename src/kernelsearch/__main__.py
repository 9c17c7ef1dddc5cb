"""``python -m kernelsearch`` is the ``kernelsearch`` command."""

import sys

from kernelsearch.cli.main import main

sys.exit(main())

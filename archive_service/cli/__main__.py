"""`python -m archive_service.cli`: what the indexer child, bench/ and tests run."""

import sys

from . import main

sys.exit(main())

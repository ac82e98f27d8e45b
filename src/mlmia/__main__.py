import sys

from mlmia.cli import main

sys.exit(main())

"""Allow ``python -m queuectl``."""

from queuectl.cli import main

if __name__ == "__main__":
    main()

"""``python -m aitenant`` / ``aitenant-controller``."""

from aitenant.app import main

if __name__ == "__main__":
    main()

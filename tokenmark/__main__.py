"""``python -m tokenmark`` is the ``tokenmark`` command."""

from tokenmark.cli import main

main()

"""`python -m dreaming`: the same as the `dreaming` command."""

from dreaming.cli import main

main()

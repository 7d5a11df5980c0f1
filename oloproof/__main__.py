from oloproof_core.cli import main

main()

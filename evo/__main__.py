from evo.cli import main

main()

from pcache.cli.app import main

main()

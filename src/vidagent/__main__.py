from vidagent.cli import main

main()

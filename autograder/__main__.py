from autograder.frontends.cli import main

main()

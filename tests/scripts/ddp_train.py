"""`python -m dpcore.train` as a test script: run under mpiexec with the train command's flags."""
import sys

from dpcore.train import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""python -m dpcore.bench all_reduce|reduce_scatter|all_gather|broadcast [nccl-tests flags]"""
from .cli import run

if __name__ == "__main__":
    run()

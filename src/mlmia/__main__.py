from mlmia.cli import run

run()

from spmdcheck.cli import run

run()

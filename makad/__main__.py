from makad.daemon import run_and_exit

run_and_exit()

"""The engine host (a child process) and the jobs that leave the GUI thread."""

"""The worker's protocol: typed events and commands, their JSON-lines codec, the client that runs
the worker and the loop's command queue."""

"""The data layout EchoMQ speaks, with no sockets (docs/protocol.md): ``keys`` (every key
name), ``codec`` (JSON as JavaScript writes it, the lenient readers), ``options`` (the job
options codec), ``job_hash`` (reading a job hash), ``states`` (where each state lives) and
``events`` (the events stream's entries)."""

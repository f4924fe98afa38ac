"""Where session logs live: in memory, in JSON Lines files, in PostgreSQL.

Every store speaks one session protocol (:class:`dsh_tool_todo.protocols.StoreSession`):
``append`` returns the recorded event with its ``seq``, ``subscribe`` registers a
listener called in log order, ``latest`` reads the newest event of given types
cheaply (how a host resumes a projection), and ``close`` releases the writer's
claim. Each store module imports its own dependencies only when imported.
"""

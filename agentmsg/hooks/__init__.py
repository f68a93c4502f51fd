"""The hooks: SessionStart, UserPromptSubmit, Stop and PostToolUse, for every host ``hooks/run`` serves.

Entry points: ``hooks/run HOST`` (the plugin's launcher), which runs
``hooks/agentmsg_hook.py``, which calls ``hooks.entry.main``; or
``python3 -m agentmsg.hooks.entry HOST``.  The host's hook JSON is on
stdin; ``hook_event_name`` picks the hook.  What differs per host (its output
shape, its units, its session variable) is its ``agentmsg.hosts`` module's.

Rules for all three:

* **Fail open.**  Any error (bad stdin, corrupt or missing state, a lock
  held more than ``LOCK_TIMEOUT`` seconds, a bug) means exit 0, nothing on
  stdout, and one line in ``<root>/hooks.log``.  No traceback, ever.
* **Strict host JSON.**  Context goes out in the host's own shape
  (``Host.context``); a Stop continuation as ``{"decision": "block",
  "reason"}``; nothing else (a host may reject unknown keys).  "Nothing to
  do" is empty stdout.
* **Bounded.**  Injected text stays within ``boundary.cap_from_env`` (default
  8,000, in the units each host counts against its 10,000 limit:
  ``Host.units``).
* **Attempts, never acks.**  Showing a message appends a ``presented``
  receipt (one per message, one attempt id) *before* printing, and an
  ``attempt-complete`` receipt after printing.  A message is shown again
  only if it is still unacknowledged ``REPRESENT_AFTER`` prompts later, after
  ``agentmsg delivery retry``, or after the context was cleared or compacted.
* **Lean.**  Imports only the lean core (``records``, ``fsio``,
  ``journal``, ``paths``, ``mailbox``: the same code the store uses),
  ``boundary`` and the pure part of ``delivery``: it runs on every prompt.

PostToolUse (mid-turn delivery, opt-in per binding with ``agentmsg delivery
midturn on``; rules in ``domain.midturn``) shows, between tool calls, the due
messages the binding's setting lets interrupt a turn (by default only
``--priority high``), at most once per ``min_gap``, with the prompt's cap and
boundary; presented, never acknowledged.

``{"hook_event_name": "AgentmsgProbe"}`` on stdin (an event no host sends)
answers ``agentmsg doctor``: one JSON object naming the version, the
interpreter, the package directory and the state root this hook would use.

Per-binding hook state (prompt counter, when each message was last shown,
the requests of the last Stop block, the receipts read so far, the last run)
is derived data in ``collabs/<uuid>/state/<alias>.hook.json``, replaced
atomically.  A corrupt one is logged and reset, and that prompt gets no
output.
"""

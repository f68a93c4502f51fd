"""Every record and receipt type name, in one place.

Lean: imported by the hooks on every prompt.
"""

# collab.jsonl: membership and lifecycle events
OPENED = "opened"
JOINED = "joined"
SUCCEEDED = "succeeded"
HANDOVER = "handover"
LEFT = "left"
NOTIFY_SET = "notify-set"
CLOSED = "closed"
#: The contact policy (docs/LIFECYCLE.md, "Invitations"): who may join, and the one-time tickets that admit.
POLICY_SET = "policy-set"
INVITED = "invited"
#: A session stopped through agentmsg (``agentmsg kill``): its alias stays, ``gone``, its inbox kept.
KILLED = "killed"
#: Claims (docs/CLAIMS.md, agentmsg/domain/claims.py): a participant reserves paths of a repository, or lets go.
CLAIMED = "claimed"
RELEASED = "released"
#: A session agentmsg started (``agentmsg spawn``, ``resume``) got ready: who, which pin, where it runs.  A spawn
#: that failed: its ticket revoked and, if its session had bound, that binding undone.
SPAWNED, SPAWN_FAILED = "spawned", "spawn-failed"
EVENTS = (OPENED, JOINED, SUCCEEDED, HANDOVER, LEFT, NOTIFY_SET, CLOSED, POLICY_SET, INVITED, KILLED, CLAIMED, RELEASED,
          SPAWNED, SPAWN_FAILED)
#: Contact policies: anyone who knows the collaboration's id may join, or only a ticket's holder.
OPEN_POLICY, INVITE_ONLY = "open", "invite-only"
POLICIES = (OPEN_POLICY, INVITE_ONLY)

# inbox/<alias>.jsonl and log.jsonl
MESSAGE = "message"
NOTE = "note"

# receipts/<alias>.jsonl: what happened to a message after it was stored
ACK = "ack"
PRESENTED = "presented"
COMPLETE = "attempt-complete"
RETRY = "retry"
REPLIED = "replied"
NOTIFY = "notify"
RECEIPTS = (ACK, PRESENTED, COMPLETE, RETRY, REPLIED, NOTIFY)

# delivery.jsonl: Stop-continuation envelopes and their spent slots
ENABLED = "delivery-enabled"
DISABLED = "delivery-disabled"
SLOT = "delivery-slot"

HIGH = "high"
NORMAL = "normal"
PRIORITIES = (NORMAL, HIGH)
REQUEST = "request"
UPDATE = "update"
KINDS = (REQUEST, UPDATE)

# delivery.jsonl: a binding's mid-turn (PostToolUse) delivery setting, newest wins
MIDTURN = "delivery-midturn"

# delivery.jsonl: wake consent (domain/wake.py), its rings, and the prompts that answer them
WAKE_ON = "wake-on"
WAKE_OFF = "wake-off"
WAKE_RING = "wake-ring"
WAKE_PROMPT = "wake-prompt"

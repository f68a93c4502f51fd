-- agentmsg schema 4: sessions agentmsg starts (issue 27: agentmsg spawn, kill, resume).
--
-- Two new events, each written by a member under its own alias (so the alias must be this role's, as for
-- every event): ``spawned`` (who started which pin, and where it runs) and ``spawn-failed`` (a spawn that
-- did not get ready: its ticket revoked, the binding its session made undone).  A ``killed`` event may now
-- also come from a member, for a session agentmsg spawned (``"spawned": true``), under an alias and pin
-- of this role; otherwise, as before, only from a human: pin.  The check function is replaced whole.

CREATE OR REPLACE FUNCTION agentmsg_check_record() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    rec       jsonb;
    rtype     text;
    v_owner     text;          -- the alias an inbox or receipts stream belongs to
    v_alias     text;
    v_pin       text;
    holder    name;
    tail_seq  bigint;
    tail_sum  text;
    a_found   boolean := false;  -- the message a receipt is about: found, its seq, its sender
    a_seq     bigint;
    a_sender  text;
    w_mid     text;
    w_ref     text;
    w_kind    text;
    w_prio    text;
    w_bcast   text;
    w_sender  text;
BEGIN
    BEGIN
        rec := NEW.body::jsonb;
    EXCEPTION WHEN others THEN
        PERFORM agentmsg_refuse('its body is not JSON', NEW.stream, NEW.seq);
    END;
    IF jsonb_typeof(rec) <> 'object' THEN
        PERFORM agentmsg_refuse('its body is not a JSON object', NEW.stream, NEW.seq);
    END IF;
    IF jsonb_typeof(rec -> 'seq') IS DISTINCT FROM 'number' OR (rec ->> 'seq')::numeric <> NEW.seq THEN
        PERFORM agentmsg_refuse('the record''s seq is not its row''s', NEW.stream, NEW.seq);
    END IF;
    rtype := agentmsg_text(rec, 'type', NEW.stream, NEW.seq);
    IF rtype IS NULL OR NEW.rtype IS DISTINCT FROM rtype THEN
        PERFORM agentmsg_refuse(format('the record''s type (%s) is not its row''s rtype (%s)', rtype, NEW.rtype),
                                NEW.stream, NEW.seq);
    END IF;
    IF rec ? 'collab' AND agentmsg_text(rec, 'collab', NEW.stream, NEW.seq) IS DISTINCT FROM NEW.collab::text THEN
        PERFORM agentmsg_refuse('the record names another collaboration', NEW.stream, NEW.seq);
    END IF;
    PERFORM agentmsg_need(rec, ARRAY['ts', 'sum'], NEW.stream, NEW.seq);
    IF NEW.stream IN ('events', 'notes') OR NEW.stream LIKE 'inbox/%' THEN  -- the collaboration-wide order
        PERFORM agentmsg_need_typed(rec, ARRAY['cseq'], 'number', NEW.stream, NEW.seq);
    END IF;

    -- The stream's chain goes on from its last record: no gap, no fork.
    SELECT r.seq, r.body::jsonb ->> 'sum' INTO tail_seq, tail_sum FROM agentmsg_records r
        WHERE r.collab = NEW.collab AND r.stream = NEW.stream ORDER BY r.seq DESC LIMIT 1;
    IF NEW.seq <> coalesce(tail_seq, 0) + 1
       OR agentmsg_text(rec, 'prev', NEW.stream, NEW.seq) IS DISTINCT FROM coalesce(tail_sum, '') THEN
        PERFORM agentmsg_refuse('it does not continue its stream', NEW.stream, NEW.seq);
    END IF;

    IF NEW.stream = 'events' THEN
        IF rtype NOT IN ('opened', 'joined', 'succeeded', 'handover', 'left', 'notify-set', 'closed', 'policy-set',
                         'invited', 'killed', 'spawned', 'spawn-failed') THEN
            PERFORM agentmsg_refuse(format('%s is not an event', rtype), NEW.stream, NEW.seq);
        END IF;
        IF (rtype = 'opened') <> (NEW.seq = 1) THEN
            PERFORM agentmsg_refuse('a collaboration opens with its first event, and only there', NEW.stream, NEW.seq);
        END IF;
        IF rtype = 'killed' THEN
            -- a person stops a session (rules.kill_event): a human: pin, bound to no role; a session agentmsg
            -- spawned may also be stopped by a member (its spawner, the opener's alias), whose alias and pin
            -- must be this role's.  Whether that member is its spawner or the opener is checked by clients.
            v_pin := agentmsg_text(rec, 'by', NEW.stream, NEW.seq);
            v_alias := agentmsg_text(rec, 'alias', NEW.stream, NEW.seq);
            IF v_pin IS NULL OR NOT (v_pin LIKE 'human:%'
                    OR (rec -> 'spawned' = 'true'::jsonb AND v_alias IS NOT NULL
                        AND agentmsg_holds(NEW.collab, v_alias) AND agentmsg_pin_mine(NEW.collab, v_pin, v_alias))) THEN
                PERFORM agentmsg_refuse('only a human: pin, or a member for a session agentmsg spawned, stops a '
                                        'session', NEW.stream, NEW.seq);
            END IF;
            v_alias := NULL;
        ELSIF rtype = 'closed' THEN
            -- the opener's alias closes (rules.may_close), or a human: pin, which is bound to no role
            -- (docs/POSTGRES.md)
            v_pin := agentmsg_text(rec, 'by', NEW.stream, NEW.seq);
            SELECT o.sender INTO v_alias FROM agentmsg_records o
                WHERE o.collab = NEW.collab AND o.stream = 'events' AND o.seq = 1;
            IF v_pin IS NULL OR NOT (v_pin LIKE 'human:%' OR agentmsg_pin_mine(NEW.collab, v_pin, v_alias)) THEN
                PERFORM agentmsg_refuse('the closer is not a pin of the opener''s alias on this role',
                                        NEW.stream, NEW.seq);
            END IF;
            v_alias := NULL;
        ELSE
            v_alias := agentmsg_text(rec, 'alias', NEW.stream, NEW.seq);
            PERFORM agentmsg_need(rec, CASE rtype
                WHEN 'opened' THEN ARRAY['alias', 'pin', 'runtime', 'label', 'task', 'collab']
                WHEN 'joined' THEN ARRAY['alias', 'pin', 'runtime']
                WHEN 'succeeded' THEN ARRAY['alias', 'pin', 'runtime']
                WHEN 'handover' THEN ARRAY['alias', 'to']
                WHEN 'policy-set' THEN ARRAY['alias', 'policy']
                WHEN 'invited' THEN ARRAY['alias', 'ticket']
                WHEN 'spawned' THEN ARRAY['alias', 'by', 'target', 'pin', 'host']
                WHEN 'spawn-failed' THEN ARRAY['alias', 'by', 'target', 'ticket']
                ELSE ARRAY['alias'] END, NEW.stream, NEW.seq);
            IF rtype = 'invited' THEN
                PERFORM agentmsg_need_typed(rec, ARRAY['expires_at'], 'number', NEW.stream, NEW.seq);
            END IF;
            IF rtype = 'notify-set' AND jsonb_typeof(rec -> 'notify') IS DISTINCT FROM 'object' THEN
                PERFORM agentmsg_refuse('it has no notify setting', NEW.stream, NEW.seq);
            END IF;
            SELECT b.role INTO holder FROM agentmsg_aliases b WHERE b.collab = NEW.collab AND b.alias = v_alias;
            IF holder IS NOT NULL AND holder <> session_user THEN
                PERFORM agentmsg_refuse(format('alias %s is bound to another role', v_alias), NEW.stream, NEW.seq);
            END IF;
            IF holder IS NULL AND rtype NOT IN ('opened', 'joined') THEN
                PERFORM agentmsg_refuse(format('alias %s is not bound to this role', v_alias), NEW.stream, NEW.seq);
            END IF;
            IF rtype IN ('opened', 'joined', 'succeeded')
               AND agentmsg_pin_elsewhere(NEW.collab, agentmsg_text(rec, 'pin', NEW.stream, NEW.seq)) THEN
                PERFORM agentmsg_refuse('its pin is bound to an alias of another role', NEW.stream, NEW.seq);
            END IF;
            IF holder IS NULL THEN
                INSERT INTO agentmsg_aliases (collab, alias, role) VALUES (NEW.collab, v_alias, session_user);
            END IF;
        END IF;
        w_sender := v_alias;

    ELSIF NEW.stream LIKE 'inbox/%' THEN
        v_owner := substr(NEW.stream, length('inbox/') + 1);
        IF v_owner !~ '^[a-z][a-z0-9_-]{0,31}$' THEN
            PERFORM agentmsg_refuse('no such stream', NEW.stream, NEW.seq);
        END IF;
        IF rtype <> 'message' THEN
            PERFORM agentmsg_refuse(format('%s is not a message', rtype), NEW.stream, NEW.seq);
        END IF;
        PERFORM agentmsg_need(rec, ARRAY['id', 'collab', 'sender', 'sender_runtime', 'to', 'kind', 'priority',
                                         'subject', 'body', 'digest'], NEW.stream, NEW.seq);
        IF rec ->> 'to' <> v_owner THEN
            PERFORM agentmsg_refuse('the message is addressed to another inbox', NEW.stream, NEW.seq);
        END IF;
        w_sender := rec ->> 'sender';
        IF NOT agentmsg_holds(NEW.collab, w_sender) THEN
            PERFORM agentmsg_refuse(format('sender %s is not bound to this role', w_sender), NEW.stream, NEW.seq);
        END IF;
        v_pin := agentmsg_text(rec, 'sender_pin', NEW.stream, NEW.seq);
        IF v_pin IS NOT NULL AND NOT agentmsg_pin_mine(NEW.collab, v_pin, w_sender) THEN
            PERFORM agentmsg_refuse(format('%s was never bound to sender %s', v_pin, w_sender), NEW.stream, NEW.seq);
        END IF;
        IF rec ->> 'kind' NOT IN ('request', 'update') OR rec ->> 'priority' NOT IN ('normal', 'high') THEN
            PERFORM agentmsg_refuse('unknown kind or priority', NEW.stream, NEW.seq);
        END IF;
        w_mid := rec ->> 'id';
        w_kind := rec ->> 'kind';
        w_prio := rec ->> 'priority';
        w_bcast := agentmsg_text(rec, 'broadcast', NEW.stream, NEW.seq);
        PERFORM agentmsg_text(rec, 'reply_to', NEW.stream, NEW.seq);

    ELSIF NEW.stream LIKE 'receipts/%' THEN
        v_owner := substr(NEW.stream, length('receipts/') + 1);
        IF v_owner !~ '^[a-z][a-z0-9_-]{0,31}$' THEN
            PERFORM agentmsg_refuse('no such stream', NEW.stream, NEW.seq);
        END IF;
        IF rtype NOT IN ('ack', 'presented', 'attempt-complete', 'retry', 'replied', 'notify') THEN
            PERFORM agentmsg_refuse(format('%s is not a receipt', rtype), NEW.stream, NEW.seq);
        END IF;
        w_ref := agentmsg_text(rec, 'message', NEW.stream, NEW.seq);
        PERFORM agentmsg_need(rec, CASE rtype
            WHEN 'presented' THEN ARRAY['attempt'] WHEN 'attempt-complete' THEN ARRAY['attempt']
            WHEN 'retry' THEN ARRAY['attempt'] WHEN 'replied' THEN ARRAY['by'] WHEN 'notify' THEN ARRAY['detail']
            ELSE ARRAY[]::text[] END, NEW.stream, NEW.seq);
        IF rtype = 'notify' THEN
            PERFORM agentmsg_need_typed(rec, ARRAY['ok'], 'boolean', NEW.stream, NEW.seq);
        END IF;
        IF rtype <> 'attempt-complete' THEN
            IF w_ref IS NULL THEN
                PERFORM agentmsg_refuse('it names no message', NEW.stream, NEW.seq);
            END IF;
            SELECT m.seq, m.sender INTO a_seq, a_sender FROM agentmsg_records m
                WHERE m.collab = NEW.collab AND m.stream = 'inbox/' || v_owner AND m.mid = w_ref;
            a_found := FOUND;
        END IF;
        IF rtype IN ('replied', 'notify') THEN
            -- the reply's sender or the doorbell's caller: either party of the message
            IF NOT a_found OR NOT (agentmsg_holds(NEW.collab, v_owner) OR agentmsg_holds(NEW.collab, a_sender)) THEN
                PERFORM agentmsg_refuse(format('no message %s between this role and %s', w_ref, v_owner),
                                        NEW.stream, NEW.seq);
            END IF;
        ELSE
            IF NOT agentmsg_holds(NEW.collab, v_owner) THEN
                PERFORM agentmsg_refuse(format('the receipts of %s are not this role''s', v_owner), NEW.stream, NEW.seq);
            END IF;
            IF rtype = 'ack' AND (NOT a_found OR (rec ? 'mseq' AND (rec ->> 'mseq') IS DISTINCT FROM a_seq::text)) THEN
                PERFORM agentmsg_refuse(format('no message %s in the inbox of %s', w_ref, v_owner), NEW.stream, NEW.seq);
            END IF;
            v_pin := agentmsg_text(rec, CASE rtype WHEN 'presented' THEN 'pin' ELSE 'by' END, NEW.stream, NEW.seq);
            IF rtype IN ('ack', 'presented', 'retry') AND v_pin IS NOT NULL
               AND NOT agentmsg_pin_mine(NEW.collab, v_pin, v_owner) THEN
                PERFORM agentmsg_refuse(format('%s was never bound to %s', v_pin, v_owner), NEW.stream, NEW.seq);
            END IF;
        END IF;

    ELSIF NEW.stream = 'notes' THEN
        IF rtype <> 'note' THEN
            PERFORM agentmsg_refuse(format('%s is not a note', rtype), NEW.stream, NEW.seq);
        END IF;
        PERFORM agentmsg_need(rec, ARRAY['id', 'author', 'text'], NEW.stream, NEW.seq);
        IF NOT (rec ->> 'author' LIKE 'human:%' OR agentmsg_holds(NEW.collab, rec ->> 'author')) THEN
            PERFORM agentmsg_refuse(format('author %s is not bound to this role', rec ->> 'author'),
                                    NEW.stream, NEW.seq);
        END IF;

    ELSIF NEW.stream = 'delivery' THEN
        IF rtype NOT IN ('delivery-enabled', 'delivery-disabled', 'delivery-slot', 'delivery-midturn',
                         'wake-on', 'wake-off', 'wake-ring', 'wake-prompt') THEN
            PERFORM agentmsg_refuse(format('%s is not a delivery record', rtype), NEW.stream, NEW.seq);
        END IF;
        PERFORM agentmsg_need(rec, CASE rtype
            WHEN 'delivery-enabled' THEN ARRAY['alias', 'pin', 'envelope'] WHEN 'wake-on' THEN ARRAY['alias', 'pin', 'consent']
            ELSE ARRAY['alias', 'pin'] END, NEW.stream, NEW.seq);
        PERFORM agentmsg_need_typed(rec, CASE rtype
            WHEN 'delivery-enabled' THEN ARRAY['expires_at', 'slots'] WHEN 'wake-on' THEN ARRAY['expires_at']
            ELSE ARRAY[]::text[] END, 'number', NEW.stream, NEW.seq);
        v_alias := rec ->> 'alias';
        IF rtype = 'wake-ring' THEN
            -- a sender rings the recipient: any participant of this role may record a ring
            IF NOT EXISTS (SELECT 1 FROM agentmsg_aliases b WHERE b.collab = NEW.collab AND b.role = session_user) THEN
                PERFORM agentmsg_refuse('this role holds no alias here', NEW.stream, NEW.seq);
            END IF;
        ELSE
            IF NOT agentmsg_holds(NEW.collab, v_alias) THEN
                PERFORM agentmsg_refuse(format('alias %s is not bound to this role', v_alias), NEW.stream, NEW.seq);
            END IF;
            v_pin := agentmsg_text(rec, 'pin', NEW.stream, NEW.seq);
            IF v_pin IS NOT NULL AND NOT agentmsg_pin_mine(NEW.collab, v_pin, v_alias) THEN
                PERFORM agentmsg_refuse(format('%s was never bound to %s', v_pin, v_alias), NEW.stream, NEW.seq);
            END IF;
        END IF;

    ELSE
        PERFORM agentmsg_refuse('no such stream', NEW.stream, NEW.seq);
    END IF;

    -- The lookup columns every policy and query reads are the record's own.
    IF (NEW.mid, NEW.ref, NEW.kind, NEW.priority, NEW.bcast, NEW.sender)
       IS DISTINCT FROM (w_mid, w_ref, w_kind, w_prio, w_bcast, w_sender) THEN
        PERFORM agentmsg_refuse('its lookup columns disagree with the record', NEW.stream, NEW.seq);
    END IF;
    RETURN NEW;
END $$;


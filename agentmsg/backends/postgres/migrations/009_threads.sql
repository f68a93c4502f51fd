-- agentmsg schema 9: threads (issue 31, docs/HANDOFFS.md "Threads").
--
-- A message names its thread when it does not start one: "thread" is the name `send --thread` gave,
-- or the root of its reply chain.  The client checks it (agentmsg/domain/validate.py, rules.thread_for);
-- the server checks what a member writing with psql could otherwise forge around it: a thread is one
-- line of 1 to 128 characters without control characters, and a reply is in the thread of the message
-- it answers (that message's "thread", else its handoff's, else its broadcast, else its own id),
-- when that message is in the collaboration.  A record with no "thread" is as before (a history
-- copied from a store older than threads).  A third BEFORE INSERT trigger; it refuses as the others
-- do (insufficient_privilege: the CLI's exit 9).

CREATE FUNCTION agentmsg_thread_of(rec jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(rec ->> 'thread', rec -> 'handoff' ->> 'thread', rec ->> 'broadcast', rec ->> 'id')
$$;

CREATE FUNCTION agentmsg_check_thread() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    rec    jsonb;
    named  text;
    parent text;
    theirs text;
BEGIN
    IF NEW.stream NOT LIKE 'inbox/%' THEN
        RETURN NEW;
    END IF;
    rec := NEW.body::jsonb;
    IF NOT rec ? 'thread' OR jsonb_typeof(rec -> 'thread') = 'null' THEN
        RETURN NEW;
    END IF;
    named := agentmsg_text(rec, 'thread', NEW.stream, NEW.seq);
    IF length(named) NOT BETWEEN 1 AND 128 OR btrim(named) = '' OR named ~ '[\x01-\x1f\x7f]' THEN
        PERFORM agentmsg_refuse('its thread is not one line of 1 to 128 characters', NEW.stream, NEW.seq);
    END IF;
    parent := nullif(rec ->> 'reply_to', '');
    IF parent IS NOT NULL THEN
        IF position('/' IN parent) > 0 THEN
            parent := split_part(parent, '/', 2);
        END IF;
        SELECT agentmsg_thread_of(m.body::jsonb) INTO theirs FROM agentmsg_records m
            WHERE m.collab = NEW.collab AND m.mid = parent AND m.stream LIKE 'inbox/%' LIMIT 1;
        IF theirs IS NOT NULL AND theirs IS DISTINCT FROM agentmsg_thread_of(rec) THEN
            PERFORM agentmsg_refuse('a reply is in the thread of the message it answers', NEW.stream, NEW.seq);
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER agentmsg_records_thread BEFORE INSERT ON agentmsg_records
    FOR EACH ROW EXECUTE FUNCTION agentmsg_check_thread();

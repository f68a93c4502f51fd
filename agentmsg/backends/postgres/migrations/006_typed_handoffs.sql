-- agentmsg schema 6: typed handoffs (issue 31, docs/HANDOFFS.md).
--
-- A message may carry a "handoff": its type (task, result, gate_request, gate_response, status),
-- its payload, its thread and, for an answer, the correlation_id of what it answers.  The client
-- checks the payload against its schema (agentmsg/domain/handoffs.py); the server checks what a
-- member writing with psql could otherwise forge around it: the handoff's shape, a kind that
-- agrees with its type, and that a result or gate_response answers a task or gate_request of the
-- same collaboration, which it names as its reply too.  A second BEFORE INSERT trigger, so that
-- schema 3's check (agentmsg_check_record) stays as it is; it runs after it (triggers fire in
-- name order) and refuses as it does (insufficient_privilege: the CLI's exit 9).

CREATE FUNCTION agentmsg_check_handoff() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    rec     jsonb;
    h       jsonb;
    h_type  text;
    corr    text;
    answers text;
    found   text;
BEGIN
    IF NEW.stream NOT LIKE 'inbox/%' THEN
        RETURN NEW;
    END IF;
    rec := NEW.body::jsonb;
    IF NOT rec ? 'handoff' OR jsonb_typeof(rec -> 'handoff') = 'null' THEN
        RETURN NEW;
    END IF;
    h := rec -> 'handoff';
    IF jsonb_typeof(h) <> 'object' OR jsonb_typeof(h -> 'payload') IS DISTINCT FROM 'object'
       OR jsonb_typeof(h -> 'type') IS DISTINCT FROM 'string' OR jsonb_typeof(h -> 'thread') IS DISTINCT FROM 'string' THEN
        PERFORM agentmsg_refuse('its handoff is not a type, a payload and a thread', NEW.stream, NEW.seq);
    END IF;
    h_type := h ->> 'type';
    IF h_type NOT IN ('task', 'result', 'gate_request', 'gate_response', 'status') THEN
        PERFORM agentmsg_refuse(format('%s is not a handoff type', h_type), NEW.stream, NEW.seq);
    END IF;
    IF (h_type IN ('task', 'gate_request')) <> (rec ->> 'kind' = 'request') THEN
        PERFORM agentmsg_refuse(format('a %s is not a %s', h_type, rec ->> 'kind'), NEW.stream, NEW.seq);
    END IF;
    IF rec ->> 'broadcast' IS NOT NULL THEN
        PERFORM agentmsg_refuse('a handoff goes to one recipient', NEW.stream, NEW.seq);
    END IF;
    corr := agentmsg_text(h, 'correlation_id', NEW.stream, NEW.seq);
    IF corr IS NOT NULL AND split_part(coalesce(rec ->> 'reply_to', ''), '/', 2) <> corr
       AND coalesce(rec ->> 'reply_to', '') <> corr THEN
        PERFORM agentmsg_refuse('its correlation_id is not the message it replies to', NEW.stream, NEW.seq);
    END IF;
    answers := CASE h_type WHEN 'result' THEN 'task' WHEN 'gate_response' THEN 'gate_request' END;
    IF answers IS NOT NULL THEN
        IF corr IS NULL THEN
            PERFORM agentmsg_refuse(format('a %s names no correlation_id', h_type), NEW.stream, NEW.seq);
        END IF;
        SELECT m.body::jsonb -> 'handoff' ->> 'type' INTO found FROM agentmsg_records m
            WHERE m.collab = NEW.collab AND m.mid = corr AND m.stream LIKE 'inbox/%';
        IF found IS DISTINCT FROM answers THEN
            PERFORM agentmsg_refuse(format('a %s answers a %s, and %s is not one', h_type, answers, corr),
                                    NEW.stream, NEW.seq);
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER agentmsg_records_handoff BEFORE INSERT ON agentmsg_records
    FOR EACH ROW EXECUTE FUNCTION agentmsg_check_handoff();

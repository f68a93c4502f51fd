-- agentmsg schema 10: sends under contention (issue 32, docs/POSTGRES.md "Many writers, one collaboration").
--
-- 1. The staging queue.  A send that finds its collaboration's row locked does not queue on the lock
--    with its whole transaction: it stages what it asks for (the request, not a record) in
--    agentmsg_staged and waits for the lock.  Whoever holds the lock sequences every request of its own
--    role staged for that collaboration, each in a savepoint, in one transaction: one WAL flush for the
--    batch, the records sealed, checked (every trigger of agentmsg_records, as ever) and inserted as one
--    writer would, and each request's outcome written into its row in the same transaction.  A staged
--    row is a request, never a record: no reader of the history reads it, and it is applied only while
--    the session that staged it is still connected (it holds a session-level advisory lock named after
--    the row, ('agmt', id), until it takes its answer), so a writer that died or whose server restarted
--    is never answered by a record it did not wait for.
-- 2. The helper functions of the record checks and of row-level security in PL/pgSQL, not SQL: a
--    SECURITY DEFINER SQL function is planned again on every call (it cannot be inlined), a PL/pgSQL
--    one keeps its plan for the session.  Same queries, same answers.

CREATE TABLE agentmsg_staged (
    id      bigserial PRIMARY KEY,
    collab  uuid NOT NULL REFERENCES agentmsg_collabs (id),
    role    name NOT NULL DEFAULT session_user,
    request text NOT NULL,                      -- what the writer asks for (the service's JSON), opaque here
    outcome text,                               -- set by the sequencer, in the transaction that stored its records
    staged  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX agentmsg_staged_pending ON agentmsg_staged (collab, role, id);

ALTER TABLE agentmsg_staged ENABLE ROW LEVEL SECURITY;

-- A role stages, reads, answers and removes only its own requests, in collaborations it is in.
CREATE POLICY staged_own ON agentmsg_staged FOR ALL USING (role = session_user)
    WITH CHECK (role = session_user AND agentmsg_is_member(collab));

REVOKE ALL ON agentmsg_staged FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON agentmsg_staged TO agentmsg_client;
GRANT UPDATE (outcome) ON agentmsg_staged TO agentmsg_client;
GRANT USAGE ON SEQUENCE agentmsg_staged_id_seq TO agentmsg_client;

CREATE OR REPLACE FUNCTION agentmsg_is_member(c uuid) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM agentmsg_members WHERE collab = c AND role = session_user);
END $$;

CREATE OR REPLACE FUNCTION agentmsg_holds(c uuid, a text) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM agentmsg_aliases WHERE collab = c AND alias = a AND role = session_user);
END $$;

CREATE OR REPLACE FUNCTION agentmsg_pin_mine(c uuid, p text, a text) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM agentmsg_records e JOIN agentmsg_aliases b ON b.collab = e.collab AND b.alias = e.sender
        WHERE e.collab = c AND e.stream = 'events' AND e.rtype IN ('opened', 'joined', 'succeeded')
          AND b.role = session_user AND (a IS NULL OR e.sender = a) AND e.body::jsonb ->> 'pin' = p);
END $$;

CREATE OR REPLACE FUNCTION agentmsg_pin_elsewhere(c uuid, p text) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM agentmsg_records e JOIN agentmsg_aliases b ON b.collab = e.collab AND b.alias = e.sender
        WHERE e.collab = c AND e.stream = 'events' AND e.rtype IN ('opened', 'joined', 'succeeded')
          AND b.role <> session_user AND e.body::jsonb ->> 'pin' = p);
END $$;

-- The advisory lock a staging session holds while it waits: ('agmt', this key).
CREATE FUNCTION agentmsg_staged_key(sid bigint) RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$ SELECT (sid % 2147483647)::integer $$;

-- The collaboration's row, its order counter, its number of events, and whether requests of this role
-- are staged there (what a writer reads once it holds the lock).
CREATE FUNCTION agentmsg_look(c uuid) RETURNS TABLE (cseq bigint, events bigint, pending boolean)
    LANGUAGE sql STABLE AS $$
    SELECT k.cseq, coalesce((SELECT max(r.seq) FROM agentmsg_records r WHERE r.collab = k.id AND r.stream = 'events'), 0),
           EXISTS (SELECT 1 FROM agentmsg_staged s WHERE s.collab = k.id AND s.role = session_user AND s.outcome IS NULL)
    FROM agentmsg_collabs k WHERE k.id = c
$$;

-- The collaboration's lock without waiting for it: taken (its row locked, then its turn: the advisory
-- transaction lock ('agms', hashtext(collab)) every holder of the row takes after it), or, when another
-- transaction holds it, ``request`` staged (committed by the caller without waiting for the disk).
-- One row: (cseq, events, pending, NULL) locked, (NULL, NULL, NULL, staged id) staged; no row: no such
-- collaboration (for this role).
CREATE FUNCTION agentmsg_lock_or_stage(c uuid, request text)
    RETURNS TABLE (cseq bigint, events bigint, pending boolean, staged bigint)
    LANGUAGE plpgsql AS $$
DECLARE
    sid bigint;
BEGIN
    PERFORM 1 FROM agentmsg_collabs k WHERE k.id = c FOR NO KEY UPDATE SKIP LOCKED;
    IF FOUND THEN
        PERFORM pg_advisory_xact_lock(1634168179, hashtext(c::text));
        RETURN QUERY SELECT l.cseq, l.events, l.pending, NULL::bigint FROM agentmsg_look(c) l;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM agentmsg_collabs k WHERE k.id = c) THEN
        RETURN;
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);  -- a request, not a record (see above)
    INSERT INTO agentmsg_staged (collab, request) VALUES (c, request) RETURNING id INTO sid;
    PERFORM pg_advisory_lock(1634168180, agentmsg_staged_key(sid));  -- held while this session waits
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::boolean, sid;
END $$;

-- A staged request's writer waits here, in one call: until a sequencer answered it (its outcome, the row
-- removed, committed by the caller without waiting for the disk) or the lock is free (taken as above, for
-- the caller to apply what is staged).  Between tries it waits for the holder's turn in shared mode, which
-- it gets, with every other waiter at once, when the holder's transaction ends.  Each statement of the
-- loop reads with a snapshot of its own: it sees what the holder committed.
CREATE FUNCTION agentmsg_await(c uuid, sid bigint)
    RETURNS TABLE (outcome text, cseq bigint, events bigint, pending boolean)
    LANGUAGE plpgsql AS $$
DECLARE
    answer text;
    turn   integer := hashtext(c::text);
BEGIN
    LOOP
        DELETE FROM agentmsg_staged s WHERE s.id = sid AND s.outcome IS NOT NULL RETURNING s.outcome INTO answer;
        IF FOUND THEN
            PERFORM set_config('synchronous_commit', 'off', true);  -- it removed a request, stored nothing
            PERFORM pg_advisory_unlock(1634168180, agentmsg_staged_key(sid));
            RETURN QUERY SELECT answer, NULL::bigint, NULL::bigint, NULL::boolean;
            RETURN;
        END IF;
        PERFORM 1 FROM agentmsg_collabs k WHERE k.id = c FOR NO KEY UPDATE SKIP LOCKED;
        IF FOUND THEN
            PERFORM pg_advisory_xact_lock(1634168179, turn);
            RETURN QUERY SELECT NULL::text, l.cseq, l.events, l.pending FROM agentmsg_look(c) l;
            RETURN;
        END IF;
        BEGIN
            PERFORM pg_advisory_lock_shared(1634168179, turn);  -- until the holder's transaction ends
            PERFORM pg_advisory_unlock_shared(1634168179, turn);
        EXCEPTION WHEN OTHERS OR query_canceled THEN  -- cancelled: never keep the turn from the next holder
            PERFORM pg_advisory_unlock_shared(1634168179, turn);
            RAISE;
        END;
    END LOOP;
END $$;

REVOKE ALL ON FUNCTION agentmsg_lock_or_stage(uuid, text), agentmsg_await(uuid, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agentmsg_lock_or_stage(uuid, text), agentmsg_await(uuid, bigint) TO agentmsg_client;

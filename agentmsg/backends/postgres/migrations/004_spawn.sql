-- agentmsg schema 4: sessions agentmsg starts (issue 27, docs/LIFECYCLE.md: spawn, kill, resume, fork).
--
-- An edit of agentmsg_check_record() as it stands in the database (pg_get_functiondef), not a copy of the
-- whole function, so that it composes with any other migration that edits the function (005, claims, in
-- either order: neither edits an anchor of the other); it refuses to run when an anchor it edits is gone,
-- and does nothing when the function knows spawns already.
--   * `spawned` (who started which pin, and where it runs) and `spawn-failed` (a spawn that did not get
--     ready: its ticket revoked, the binding its session made undone) are events, written by a member
--     under its own alias (so, as for every event naming an alias, only that alias's role writes them);
--   * a `killed` event may now also come from a member, for a session agentmsg spawned ("spawned": true),
--     under an alias and a pin of its own role; otherwise, as before, only from a human: pin.  Whether that
--     member is the session's spawner or the opener is checked by agentmsg's clients.
DO $migrate$
DECLARE
    def text := pg_get_functiondef('agentmsg_check_record()'::regprocedure);
    a_events text := '''invited'', ''killed'') THEN';
    a_kill text := 'IF v_pin IS NULL OR v_pin NOT LIKE ''human:%'' THEN
                PERFORM agentmsg_refuse(''only a human: pin stops a session'', NEW.stream, NEW.seq);';
    a_need text := 'WHEN ''invited'' THEN ARRAY[''alias'', ''ticket'']';
BEGIN
    IF position('''spawned''' IN def) > 0 THEN
        RETURN;  -- already knows spawns
    END IF;
    IF position(a_events IN def) = 0 OR position(a_kill IN def) = 0 OR position(a_need IN def) = 0 THEN
        RAISE EXCEPTION 'agentmsg migration 004: agentmsg_check_record() is not the function this migration edits';
    END IF;
    def := replace(def, a_events, '''invited'', ''killed'', ''spawned'', ''spawn-failed'') THEN');
    def := replace(def, a_kill, 'v_alias := agentmsg_text(rec, ''alias'', NEW.stream, NEW.seq);
            IF v_pin IS NULL OR NOT (v_pin LIKE ''human:%''
                    OR (rec -> ''spawned'' = ''true''::jsonb AND v_alias IS NOT NULL
                        AND agentmsg_holds(NEW.collab, v_alias) AND agentmsg_pin_mine(NEW.collab, v_pin, v_alias))) THEN
                PERFORM agentmsg_refuse(''only a human: pin, or a member for a session agentmsg spawned, stops a ''
                                        ''session'', NEW.stream, NEW.seq);');
    def := replace(def, a_need, a_need || '
                WHEN ''spawned'' THEN ARRAY[''alias'', ''by'', ''target'', ''pin'', ''host'']
                WHEN ''spawn-failed'' THEN ARRAY[''alias'', ''by'', ''target'', ''ticket'']');
    EXECUTE def;
END
$migrate$;

-- Claims (issue 28, docs/CLAIMS.md): the record checks know `claimed` and `released`.
--
-- An edit of agentmsg_check_record() as it stands in the database (pg_get_functiondef), not a copy of the
-- whole function: it composes with any migration that changed the function before it (another numbered
-- migration may add events of its own), and it refuses to run when an anchor it edits is gone.
--   * `claimed` and `released` are events;
--   * a `claimed` event names its alias, pin, repository, pattern and a numeric expires_at, and (as every
--     event naming an alias) only the role bound to that alias writes it;
--   * a `released` event is its holder's (the alias's role), or, with "force": true, a human: pin's,
--     bound to no role, naming the holder as its `target` (as `killed` does).
DO $migrate$
DECLARE
    def text := pg_get_functiondef('agentmsg_check_record()'::regprocedure);
    a_events text := 'IF rtype NOT IN (''opened'', ';
    a_killed text := 'IF rtype = ''killed'' THEN';
    a_need text := 'WHEN ''policy-set'' THEN ARRAY[''alias'', ''policy'']';
    a_typed text := 'IF rtype = ''invited'' THEN';
BEGIN
    IF position(a_events IN def) = 0 OR position(a_killed IN def) = 0 OR position(a_need IN def) = 0
       OR position(a_typed IN def) = 0 THEN
        RAISE EXCEPTION 'agentmsg migration 005: agentmsg_check_record() is not the function this migration edits';
    END IF;
    IF position('''claimed''' IN def) > 0 THEN
        RETURN;  -- already knows claims
    END IF;
    def := replace(def, a_events, 'IF rtype NOT IN (''claimed'', ''released'', ''opened'', ');
    def := replace(def, a_killed, 'IF rtype = ''released'' AND (rec ->> ''force'') = ''true'' THEN
            -- a person releases another participant''s claim (domain/claims.released_event): a human: pin
            v_pin := agentmsg_text(rec, ''by'', NEW.stream, NEW.seq);
            IF v_pin IS NULL OR v_pin NOT LIKE ''human:%'' THEN
                PERFORM agentmsg_refuse(''only a human: pin forces a release'', NEW.stream, NEW.seq);
            END IF;
            v_alias := NULL;
        ELSIF ' || substr(a_killed, 4));
    def := replace(def, a_need, 'WHEN ''claimed'' THEN ARRAY[''alias'', ''pin'', ''repo'', ''pattern'']
                ' || a_need);
    def := replace(def, a_typed, 'IF rtype IN (''invited'', ''claimed'') THEN');
    EXECUTE def;
END
$migrate$;

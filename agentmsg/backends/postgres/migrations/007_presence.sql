-- agentmsg schema 7: presence, reported by each machine's mirror (agentmsg sync) so the others see,
-- coarsely, whether a session on another machine is there (docs/LIFECYCLE.md).
--
-- * Not history: one row per (collaboration, alias), replaced in place; nothing reads it as a record.
-- * Only the role that holds the alias may report for it, and the server stamps the time and the role:
--   a client cannot make a report look fresher than it is, nor report for another machine's session.
-- * Readers check the row's pin against the registry's (a row left by a session the alias moved away
--   from is not that alias's presence).

CREATE TABLE agentmsg_presence (
    collab        uuid NOT NULL REFERENCES agentmsg_collabs (id),
    alias         text NOT NULL,
    pin           text NOT NULL CHECK (length(pin) BETWEEN 1 AND 300),
    state         text NOT NULL CHECK (state IN ('working', 'idle', 'listening', 'gone')),
    quiet         double precision CHECK (quiet IS NULL OR quiet >= 0),  -- seconds since its last activity, then
    reported_at   timestamptz NOT NULL DEFAULT now(),
    role          name NOT NULL DEFAULT session_user,
    PRIMARY KEY (collab, alias)
);

CREATE FUNCTION agentmsg_stamp_presence() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
    NEW.reported_at := now();
    NEW.role := session_user;
    RETURN NEW;
END $$;

CREATE TRIGGER agentmsg_presence_stamp BEFORE INSERT OR UPDATE ON agentmsg_presence
    FOR EACH ROW EXECUTE FUNCTION agentmsg_stamp_presence();

ALTER TABLE agentmsg_presence ENABLE ROW LEVEL SECURITY;

CREATE POLICY presence_read ON agentmsg_presence FOR SELECT USING (agentmsg_is_member(collab));
CREATE POLICY presence_report ON agentmsg_presence FOR INSERT WITH CHECK (agentmsg_holds(collab, alias));
CREATE POLICY presence_renew ON agentmsg_presence FOR UPDATE USING (agentmsg_holds(collab, alias))
    WITH CHECK (agentmsg_holds(collab, alias));

REVOKE ALL ON agentmsg_presence FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON agentmsg_presence TO agentmsg_client;
